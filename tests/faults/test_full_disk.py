"""A full disk under ``bank``: during the data writes of a run (its stages' attempts; the
sink, whose message links its input's files, writes none and commits) and during a ledger
commit. Each time the error is one of epochgate's, naming the stage, the epoch and the file;
nothing is committed (ledger verify clean, nothing uncommitted visible); once the space is back
the next run succeeds and every output equals the oracle (``tests.faults.invariants``). The small
file system is a tmpfs (``tests.faults.disks``); Spark's scratch space stays on the big one."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from pipelines.errors import RunFailedError, StageWriteError
from pipelines.run.executor import Admitted
from pipelines.run.runtime import Runtime
from progress.errors import EpochgateError, LedgerFullError
from progress.ledger import Ledger
from tests.faults import invariants
from tests.faults.disks import small_disk
from tests.faults.recorder import Recorder
from tests.faults.scenario import Home, new_home, pipeline, run_before, send_epoch

pytestmark = [pytest.mark.faults, pytest.mark.spark, pytest.mark.ledger]

DONE = 2
"""Epochs sent and run (0 and 1; epoch 2 is the late one, never released here)."""


def _no_traceback(err: BaseException) -> None:
    """The message is one of epochgate's sentences, not a Java, Py4J or DuckDB one."""
    text = str(err)
    for word in ("Py4J", "java.", "at org.", "IO Error", "TransactionContext"):
        assert word not in text, text


def _recover(
    rt: Runtime, home: Home, before: dict[str, invariants.Frontiers]
) -> tuple[float, invariants.Tally]:
    clock = time.monotonic()
    rt.run()
    seconds = time.monotonic() - clock
    return seconds, invariants.check_all(rt, None, home, DONE, before)


def test_a_full_data_disk_fails_the_writes_naming_stage_epoch_and_file(
    tmp_path: Path, spark: SparkSession, recorder: Recorder
) -> None:
    campaign = recorder.campaign("full disk")
    home = new_home(tmp_path / "home", epochs=3, rows=30, accounts=6)
    with small_disk(tmp_path / "small") as disk:
        rt = Runtime(pipeline(), Ledger(home.ledger_path), spark, disk.root / "data")
        send_epoch(rt, home.data, 0)
        rt.run()
        send_epoch(rt, home.data, 1)
        run_before(rt, "export", [1])  # the sink is ready at epoch 1 when the disk fills
        before = invariants.snapshot(rt)

        disk.fill()
        with pytest.raises(RunFailedError) as caught:
            rt.run()
        failures = caught.value.failures
        assert {f.stage for f in failures} >= {"enriched", "balances"}
        # The sink writes no data: its message is hard links to its input's committed files,
        # which a full disk does not refuse.
        assert "export" not in {f.stage for f in failures}
        assert 1 in rt.ledger.done_epochs("bank", "export")
        (message,) = rt.ledger.message("bank", "export", 0, 1)
        assert all(f.stat().st_nlink >= 2 for f in Path(message.path).glob("*.parquet"))
        for failure in failures:
            assert isinstance(failure, StageWriteError), failure
            assert failure.epoch == 1
            assert failure.file is not None
            assert Path(failure.file).is_relative_to(disk.root / "data" / "bank" / failure.stage)
            assert "no space left on the device" in str(failure)
            assert not Path(failure.file).exists()  # what it had written was removed
            _no_traceback(failure)
        after_kill = invariants.check_after_kill(rt, None, before)
        assert after_kill.problems == []
        for failure in failures:
            assert 1 not in rt.ledger.done_epochs("bank", failure.stage)

        disk.free()
        seconds, tally = _recover(rt, home, before)
        tally.add(after_kill)
        campaign.recovered(seconds)
        campaign.checked(tally)
        assert tally.problems == []
        assert (tally.lost, tally.doubled) == (0, 0)


def test_a_full_ledger_disk_fails_the_commit_naming_stage_epoch_and_ledger(
    tmp_path: Path, spark: SparkSession, recorder: Recorder
) -> None:
    campaign = recorder.campaign("full disk")
    with small_disk(tmp_path / "small") as disk:
        home = new_home(disk.root / "home", epochs=3, rows=30, accounts=6)
        rt = Runtime(pipeline(), Ledger(home.ledger_path), spark, tmp_path / "data")
        send_epoch(rt, home.data, 0)
        rt.run()
        send_epoch(rt, home.data, 1)
        before = invariants.snapshot(rt)

        # One run between its work and its commit, as ``run()`` makes it.
        with rt.ledger.session():
            admitted = rt.executor.admit("valid_wires", 1)
        assert isinstance(admitted, Admitted)
        worked = rt.executor.work(admitted)
        rt.ledger.release()  # its commit attaches the file again, on the full disk
        disk.fill()
        with pytest.raises(LedgerFullError) as caught, rt.ledger.session():
            rt.executor.finish(worked)
        err = caught.value
        assert isinstance(err, EpochgateError)
        assert (err.path, err.pipeline, err.stage, err.epoch) == (
            str(home.ledger_path),
            "bank",
            "valid_wires",
            1,
        )
        assert "no space left on the device; nothing was committed" in str(err)
        _no_traceback(err)
        with pytest.raises(LedgerFullError) as caught:  # so does a whole run, at its first stage
            rt.run()
        assert caught.value.stage in ("valid_cards", "valid_wires")
        assert caught.value.epoch == 1

        disk.free()
        after_kill = invariants.check_after_kill(rt, None, before)
        assert after_kill.problems == []
        assert 1 not in rt.ledger.done_epochs("bank", "valid_wires")
        seconds, tally = _recover(rt, home, before)
        tally.add(after_kill)
        campaign.recovered(seconds)
        campaign.checked(tally)
        assert tally.problems == []
        assert (tally.lost, tally.doubled) == (0, 0)
