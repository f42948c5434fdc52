"""The token of a Spark Connect server epochgate starts: its file, and the URL a client sends."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines.spark.connect_token import (
    TOKEN_ENV,
    client_url,
    forget_token,
    new_token,
    read_token,
    redacted,
    token_file,
)

pytestmark = pytest.mark.unit


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("EPOCHGATE_HOME", str(tmp_path))
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    return tmp_path


def test_a_new_token_is_fresh_and_only_its_owner_reads_it(home: Path) -> None:
    first = new_token(15002)
    path = token_file(15002)
    assert path == home / "connect" / "15002" / "token"
    assert path.stat().st_mode & 0o777 == 0o600
    assert read_token(15002) == first
    second = new_token(15002)
    assert second != first
    assert read_token(15002) == second
    assert read_token(15003) is None
    forget_token(15002)
    assert read_token(15002) is None


def test_a_client_sends_the_token_of_the_server_on_its_port() -> None:
    assert client_url("sc://127.0.0.1:15002", 15002) == "sc://127.0.0.1:15002"  # none kept
    token = new_token(15002)
    # localhost: PySpark sends a token over a plain channel to that name only.
    assert client_url("sc://127.0.0.1:15002", 15002) == f"sc://localhost:15002/;token={token}"
    assert client_url("sc://localhost:15002/;user_id=me", 15002) == (
        f"sc://localhost:15002/;user_id=me;token={token}"
    )
    assert client_url("sc://10.0.0.5:15002", 15002) == "sc://10.0.0.5:15002"  # not this machine


def test_a_token_the_caller_gives_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    new_token(15002)
    given = "sc://127.0.0.1:15002/;token=mine"
    assert client_url(given, 15002) == "sc://localhost:15002/;token=mine"
    monkeypatch.setenv(TOKEN_ENV, "theirs")
    assert client_url("sc://127.0.0.1:15002", 15002) == "sc://localhost:15002"
    assert redacted(client_url(given, 15002)) == "sc://localhost:15002/"
