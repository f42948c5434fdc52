"""The ``epochgate`` console script."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from pipelines.cli.main import main
from pipelines.examples.bank import WORKERS
from pipelines.run.runtime import Runtime
from pipelines.testing import send_epochs
from progress.ledger import Ledger, MessageEntry
from tests.fixtures import branches
from tests.progress.ledger.scenario import bank_graph, run_epoch


@pytest.mark.unit
def test_help_describes_the_tool(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0
    assert "exact logical time" in capsys.readouterr().out


@pytest.mark.unit
def test_console_script_is_installed() -> None:
    exe = Path(sys.executable).parent / "epochgate"
    assert exe.exists(), "the epochgate console script is not installed beside the interpreter"
    out = subprocess.run([exe, "--version"], check=True, capture_output=True, text=True)
    assert out.stdout.startswith("epochgate ")


@pytest.fixture
def held_ledger(tmp_path: Path) -> Path:
    """Five epochs done; epoch 5 sent by every worker but still held by worker 2."""
    path = tmp_path / "ledger.duckdb"
    ledger = Ledger(path)
    ledger.register("bank", bank_graph())
    for epoch in range(5):
        run_epoch(ledger, epoch)
    for w in range(3):
        ledger.send("bank", "card_payments", w, MessageEntry("card_payments", 0, 5, f"late{w}"))
    for w in (0, 1):
        ledger.advance("bank", "card_payments", w, 6)
    return path


@pytest.mark.ledger
def test_status_names_who_holds_the_oldest_waiting_epoch(
    held_ledger: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["status", "--ledger", str(held_ledger)]) == 0
    out = capsys.readouterr().out
    assert "card_payments  source: w0@6, w1@6, w2@5" in out
    assert "validate epoch 5 is not ready:" in out
    assert "- source card_payments, worker 2, still holds epoch 5" in out
    assert main(["status", "--ledger", str(held_ledger), "--json"]) == 0
    data = {row["stage"]: row for row in json.loads(capsys.readouterr().out)}
    assert data["validate"]["done"] == [0, 1, 2, 3, 4]
    assert data["validate"]["waiting"] == [5]
    assert data["validate"]["blockers"] == ["source card_payments, worker 2, still holds epoch 5"]
    assert data["card_payments"]["workers"] == {"0": 6, "1": 6, "2": 5}


@pytest.mark.ledger
def test_verify_and_history(held_ledger: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ledger", "verify", "--ledger", str(held_ledger)]) == 0
    assert capsys.readouterr().out.strip().endswith("ok")
    assert main(["ledger", "history", "validate", "3", "--ledger", str(held_ledger)]) == 0
    out = capsys.readouterr().out
    assert "bank validate epoch 3" in out
    assert "key=run:validate:3" in out
    assert "attempt a:validate:3" in out


@pytest.mark.ledger
def test_errors_are_one_line(
    held_ledger: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["status", "--ledger", str(tmp_path / "missing.duckdb")]) == 1
    assert "no ledger at" in capsys.readouterr().err
    assert main(["ledger", "history", "nope", "1", "--ledger", str(held_ledger)]) == 1
    assert "no registered pipeline has a stage 'nope'" in capsys.readouterr().err
    assert main(["status", "--pipeline", "payroll", "--ledger", str(held_ledger)]) == 1
    err = capsys.readouterr().err
    assert f"pipeline 'payroll' is not registered in {held_ledger}; registered: bank" in err
    with pytest.raises(SystemExit):
        main(["ledger", "history", "validate", "x", "--ledger", str(held_ledger)])


@pytest.mark.spark
def test_send_advance_close_and_run_from_the_shell(
    tmp_path: Path, spark: object, capsys: pytest.CaptureFixture[str]
) -> None:
    inputs = tmp_path / "inputs"
    where = ["--ledger", str(tmp_path / "l.duckdb"), "--data", str(tmp_path / "data")]
    assert (
        main(
            ["demo-data", "--epochs", "1", "--rows", "60", "--accounts", "5", "--out", str(inputs)]
        )
        == 0
    )
    # The first command names the pipeline; the others use the ledger's only one.
    assert main(["advance", "-p", "bank", "accounts", "0", *where]) == 0
    said = ""
    for source, workers in WORKERS.items():
        for w in range(workers):
            folder = inputs / source / "epoch=0" / f"worker={w}"
            files = sorted(folder.glob("*.parquet")) or [inputs / "accounts.parquet"]
            for f in files[:-1]:
                assert main(["send", source, str(f), "--worker", str(w), *where]) == 0
            last = ["send", source, str(files[-1]), "--worker", str(w), *where]
            if w % 2:  # the last file and the advance in one commit
                assert main([*last, "--advance-to", "1"]) == 0
                said += capsys.readouterr().out
                assert said.endswith(f"{source} worker {w} is at epoch 1\n")
            else:
                assert main(last) == 0
                assert main(["advance", source, "1", "--worker", str(w), *where]) == 0
            assert main(["close", source, "--worker", str(w), *where]) == 0
    assert main(["run", *where]) == 0
    out = said + capsys.readouterr().out
    assert "sent " in out
    assert "card_payments worker 2 is closed" in out
    assert "8 stage run(s)" in out
    assert main(["status", "--json", "--ledger", str(tmp_path / "l.duckdb")]) == 0
    rows = {r["stage"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["balances"]["done"] == [0]
    assert rows["region_totals"]["done"] == [0]
    assert main(["backfill", "valid_wires", "--from", "0", "--to", "0", *where]) == 0
    out = capsys.readouterr().out
    assert "bank.valid_wires epoch 0: revised" in out
    assert "bank.movements epoch 0: revised" in out  # stale downstream re-ran
    assert "backfilled valid_wires epochs 0-0" in out
    assert main(["backfill", "valid_wires", "--from", "0", "--to", "1", *where]) == 1
    out, err = capsys.readouterr()
    assert "bank.valid_wires epoch 0: revised" in out  # the epoch that could run ran
    assert "backfilled valid_wires epochs 0-1" in out
    left = "epochgate: valid_wires epoch 1 was not run: no input message arrives at this epoch"
    assert err.splitlines() == [left]
    assert main(["run", "-p", "nope", *where]) == 1
    assert "unknown pipeline 'nope': not registered in" in capsys.readouterr().err


@pytest.mark.spark
def test_run_reports_each_failure_after_the_runs_that_went_on(
    tmp_path: Path, spark: SparkSession, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger = tmp_path / "l.duckdb"
    rt = Runtime(branches.broken(), Ledger(ledger), spark, tmp_path / "data")
    send_epochs(rt, "events", {0: branches.ROWS[0]}, close=True)
    where = ["--ledger", str(ledger), "--data", str(tmp_path / "data")]
    assert main(["run", "-p", "tests.fixtures.branches:broken", *where]) == 1
    out, err = capsys.readouterr()
    assert "branches.big epoch 0: " in out
    assert "branches.big_by_kind epoch 0: " in out
    assert "2 stage run(s)" in out
    assert err.splitlines() == [
        "epochgate: stage 'kind_counts', epoch 0 failed: the kinds service is down; "
        "nothing was committed"
    ]
    # One epoch's stages, upstream first: the done ones are done already, the failing one fails
    # again, and what waits on it is named.
    reference = ["-p", "tests.fixtures.branches:broken"]
    assert main(["run", *reference, "--epoch", "0", *where]) == 1
    out, err = capsys.readouterr()
    assert "branches.big epoch 0: done-already" in out
    assert err.splitlines() == [
        "epochgate: stage 'kind_counts', epoch 0 failed: the kinds service is down; "
        "nothing was committed"
    ]
    assert main(["run", *reference, "--epoch", "0", "--stage", "big", *where]) == 0
    out = capsys.readouterr().out
    assert out.startswith("  branches.big epoch 0: done-already\n1 stage run(s) at epoch 0 in ")
    assert main(["run", *reference, "--stage", "big", *where]) == 1
    assert "--stage needs --epoch" in capsys.readouterr().err
