"""Which pipeline a command means (``-p``, or the ledger's only one), and that a command that
fails registers nothing. No test here starts Spark: none of these commands needs it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from pipelines.cli.main import main
from pipelines.settings import DATA_ENV, HOME_ENV, LEDGER_ENV
from progress.ledger import Ledger, Registration
from tests.fixtures.clicks import REFERENCE, pipeline, write_clicks, write_mistyped

pytestmark = pytest.mark.ledger


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``$EPOCHGATE_HOME`` in the test's directory, which is also the working directory."""
    for name in (LEDGER_ENV, DATA_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(HOME_ENV, str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    return tmp_path / "home"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def registered(home: Path) -> list[Registration]:
    return Ledger(home / "ledger.duckdb").registrations()


def test_failed_first_commands_register_nothing(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger = home / "ledger.duckdb"
    code, _, err = run(capsys, "advance", "clicks", "1")
    assert code == 1
    assert err == (
        f"epochgate: no pipeline is registered in {ledger}: pass -p PIPELINE, an example "
        "(bank) or module:attribute\n"
    )
    assert not ledger.exists()  # nothing was guessed, nothing was created

    code, _, err = run(capsys, "advance", "-p", "bank", "clicks", "1")
    assert code == 1
    assert "pipeline 'bank', stage 'clicks': no such stage" in err
    code, _, err = run(capsys, "close", "-p", REFERENCE, "clicks", "--worker", "2")
    assert code == 1
    assert err == (
        "epochgate: pipeline 'clicks', source 'clicks': there is no worker 2 "
        "(workers: 0 .. 1); nothing was committed\n"
    )
    code, _, err = run(capsys, "backfill", "-p", REFERENCE, "per_page", "--from", "0", "--to", "0")
    assert code == 1
    assert "pipeline 'clicks' is not registered in" in err
    assert not ledger.exists()

    # Refused inside the transaction that would have registered the pipeline: rolled back.
    bad = write_mistyped(tmp_path / "bad.parquet")
    code, _, err = run(capsys, "send", "-p", REFERENCE, "clicks", str(bad))
    assert code == 1
    assert "column 'click_id'" in err
    assert registered(home) == []
    assert run(capsys, "status") == (0, "no pipelines registered\n", "")
    code, out, _ = run(capsys, "ledger", "verify")
    assert (code, out.splitlines()[0]) == (0, "0 batches checked")


def test_without_p_the_only_registered_pipeline_is_used(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = write_clicks(tmp_path / "c.parquet", [(1, "home"), (2, "about")])
    code, out, err = run(capsys, "send", "-p", REFERENCE, "clicks", str(file))
    assert (code, err) == (0, "")
    assert out.startswith(f"sent {file} to clicks worker 0 at epoch 0")
    assert registered(home) == [Registration("clicks", REFERENCE)]

    assert run(capsys, "advance", "clicks", "1") == (0, "clicks worker 0 is at epoch 1\n", "")
    assert run(capsys, "close", "clicks", "--worker", "1") == (0, "clicks worker 1 is closed\n", "")
    for name in ("clicks", REFERENCE):  # a registered name or the reference it came from
        code, out, _ = run(capsys, "status", "--json", "-p", name)
        assert code == 0
        assert {r["stage"]: r["ready"] for r in json.loads(out)} == {"clicks": [], "per_page": [0]}


def test_with_several_registered_p_names_one(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = write_clicks(tmp_path / "c.parquet", [(1, "home")])
    assert run(capsys, "send", "-p", REFERENCE, "clicks", str(file))[0] == 0
    assert run(capsys, "advance", "-p", "bank", "accounts", "1")[0] == 0
    assert registered(home) == [Registration("bank", "bank"), Registration("clicks", REFERENCE)]

    code, _, err = run(capsys, "advance", "clicks", "1")
    assert code == 1
    assert err == (
        f"epochgate: 2 pipelines are registered in {home / 'ledger.duckdb'} (bank, clicks): "
        "pass -p NAME\n"
    )
    # The registered name finds the code through the reference the ledger recorded.
    assert run(capsys, "advance", "-p", "clicks", "clicks", "1") == (
        0,
        "clicks worker 0 is at epoch 1\n",
        "",
    )
    code, out, _ = run(capsys, "status", "--json", "-p", "bank")
    assert {r["pipeline"] for r in json.loads(out)} == {"bank"}
    code, out, _ = run(capsys, "status", "--json")
    assert {r["pipeline"] for r in json.loads(out)} == {"bank", "clicks"}
    code, out, _ = run(capsys, "ledger", "verify", "-p", "clicks")
    assert (code, out.splitlines()) == (0, ["3 batches checked", "ok"])
    code, out, _ = run(capsys, "ledger", "history", "-p", "clicks", "clicks", "0")
    assert code == 0
    assert "clicks clicks epoch 0" in out
    code, _, err = run(capsys, "status", "-p", "payroll")
    assert code == 1
    assert err.startswith("epochgate: pipeline 'payroll' is not registered in ")
    assert err.endswith("; registered: bank, clicks\n")
    code, _, err = run(capsys, "run", "-p", "nope")
    assert code == 1
    assert err.startswith("epochgate: unknown pipeline 'nope': not registered in ")


def test_a_pipeline_registered_from_python_is_named_by_its_reference_once(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pipeline().register(Ledger(home / "ledger.duckdb"))  # its code's place is not known
    code, _, err = run(capsys, "advance", "clicks", "1")
    assert code == 1
    assert "pipeline 'clicks' in" in err
    assert "was registered without saying where its code is: pass -p module:attribute" in err
    assert run(capsys, "advance", "-p", REFERENCE, "clicks", "1")[0] == 0
    assert registered(home) == [Registration("clicks", REFERENCE)]
    assert run(capsys, "advance", "clicks", "2") == (0, "clicks worker 0 is at epoch 2\n", "")


def test_a_read_given_the_reference_records_it_for_the_next_command(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pipeline().register(Ledger(home / "ledger.duckdb"))  # its code's place is not known
    assert registered(home) == [Registration("clicks")]
    code, out, _ = run(capsys, "status", "--json", "-p", REFERENCE)
    assert code == 0
    assert {r["pipeline"] for r in json.loads(out)} == {"clicks"}
    assert registered(home) == [Registration("clicks", REFERENCE)]
    assert run(capsys, "advance", "clicks", "1") == (0, "clicks worker 0 is at epoch 1\n", "")
    # Reading by the registered name, or by the recorded reference, changes nothing.
    for given in ("clicks", REFERENCE):
        assert run(capsys, "ledger", "verify", "-p", given)[0] == 0
    assert registered(home) == [Registration("clicks", REFERENCE)]


def test_a_read_never_records_code_that_defines_another_graph(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = pipeline()
    other.transform("more", "clicks", fn=lambda df: df)  # not the graph REFERENCE defines
    other.register(Ledger(home / "ledger.duckdb"))
    assert run(capsys, "status", "-p", REFERENCE)[0] == 0
    assert registered(home) == [Registration("clicks")]


MODULE = """
from pipelines import Pipeline
from tests.fixtures.clicks import CLICKS


def pipeline() -> Pipeline:
    p = Pipeline("local_clicks")
    p.source("clicks", schema=CLICKS, workers=2)
    return p
"""


def test_a_module_in_the_working_directory_is_found(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    (tmp_path / "clicks_here.py").write_text(MODULE)
    code, out, err = run(capsys, "advance", "-p", "clicks_here:pipeline", "clicks", "1")
    assert (code, out, err) == (0, "clicks worker 0 is at epoch 1\n", "")
    assert registered(home) == [Registration("local_clicks", "clicks_here:pipeline")]
    assert run(capsys, "close", "clicks")[0] == 0  # the ledger remembers where the code is


def test_a_module_that_fails_to_load_is_one_line(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    (tmp_path / "clicks_typo.py").write_text("def pipeline(:\n    pass\n")
    (tmp_path / "clicks_raises.py").write_text("def pipeline():\n    return 1 / 0\n")
    code, out, err = run(capsys, "advance", "-p", "clicks_typo:pipeline", "clicks", "1")
    assert (code, out) == (1, "")
    assert err.startswith("epochgate: cannot load pipeline 'clicks_typo:pipeline': SyntaxError: ")
    assert err.endswith(f"({tmp_path / 'clicks_typo.py'}, line 1)\n")
    code, out, err = run(capsys, "advance", "-p", "clicks_raises:pipeline", "clicks", "1")
    assert (code, out) == (1, "")
    assert err == (
        "epochgate: cannot load pipeline 'clicks_raises:pipeline': ZeroDivisionError: division "
        f"by zero ({tmp_path / 'clicks_raises.py'}, line 2)\n"
    )
    code, _, err = run(capsys, "advance", "-p", "clicks_nowhere:pipeline", "clicks", "1")
    assert code == 1
    assert err == (
        "epochgate: cannot load pipeline 'clicks_nowhere:pipeline': No module named "
        f"'clicks_nowhere' (searched from {tmp_path} and the Python path)\n"
    )
    assert not (home / "ledger.duckdb").exists()
