"""Where epochgate keeps its state: one rule for every path, the same for every command."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines.cli.main import main
from pipelines.settings import (
    DATA_ENV,
    HOME_ENV,
    LEDGER_ENV,
    Settings,
    absolute,
    data_path,
    ledger_path,
    state_dir,
)
from pipelines.spark import connect_server

pytestmark = pytest.mark.unit


@pytest.fixture
def cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory of its own, with no epochgate variable set."""
    for name in (HOME_ENV, LEDGER_ENV, DATA_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_a_relative_home_is_taken_from_the_working_directory(
    cwd: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert state_dir() == cwd / ".epochgate"
    monkeypatch.setenv(HOME_ENV, "state")
    found = Settings.resolve()
    assert found == Settings(cwd / "state", cwd / "state/ledger.duckdb", cwd / "state/data")
    assert found.state == cwd / "state/state.duckdb"
    assert connect_server.server_dir(15002) == cwd / "state/connect/15002"
    (cwd / "elsewhere").mkdir()
    monkeypatch.chdir(cwd / "elsewhere")  # the same variable, read from another directory
    assert state_dir() == cwd / "elsewhere/state"


def test_flags_then_variables_then_the_home(cwd: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(cwd / "user"))
    monkeypatch.setenv(HOME_ENV, "~/eg")
    monkeypatch.setenv(LEDGER_ENV, "ledgers/main.duckdb")
    assert state_dir() == cwd / "user/eg"
    assert ledger_path() == cwd / "ledgers/main.duckdb"
    assert ledger_path("~/l.duckdb") == cwd / "user/l.duckdb"
    assert data_path() == cwd / "user/eg/data"
    monkeypatch.setenv(DATA_ENV, "../d")
    assert data_path() == cwd.parent / "d"
    assert data_path("x") == absolute("x") == cwd / "x"


def test_commands_name_the_resolved_ledger(
    cwd: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(HOME_ENV, "state")
    assert main(["status"]) == 1
    assert f"no ledger at {cwd / 'state/ledger.duckdb'};" in capsys.readouterr().err
    assert main(["status", "--ledger", "~/other.duckdb"]) == 1
    assert f"no ledger at {Path.home() / 'other.duckdb'};" in capsys.readouterr().err


def test_demo_data_writes_under_the_home(cwd: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(HOME_ENV, "state")
    args = ["demo-data", "--epochs", "1", "--rows", "20", "--accounts", "3"]
    assert main(args) == 0
    assert (cwd / "state/demo-data/accounts.parquet").is_file()
    assert not (cwd / ".epochgate").exists()
