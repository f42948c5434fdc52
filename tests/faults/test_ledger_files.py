"""The ledger file or its lock file deleted, or made unwritable (to root: ``chattr +i``), while
``bank`` runs: an error naming the file, nothing acknowledged lost, the next run after the file
is restored equal to the oracle. A lock file deleted while a process holds it lets no second
writer in: the other process's attach waits (DuckDB's own lock on the attached file), and the
holder's transaction is refused before ``COMMIT`` (``LedgerLockLostError``)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from pipelines.run.executor import Admitted, Worked
from pipelines.run.runtime import Runtime
from progress.errors import (
    EpochgateError,
    LedgerLockLostError,
    LedgerMissingError,
    LedgerUnwritableError,
)
from progress.ledger import Ledger
from progress.ledger.lock import LedgerLock
from tests.faults import invariants
from tests.faults.disks import unwritable
from tests.faults.kills import REPO
from tests.faults.recorder import Recorder
from tests.faults.scenario import Home, new_home, pipeline, send_epoch
from tests.lock_files import blocked, wanted
from tests.waiting import wait_until

pytestmark = [pytest.mark.faults, pytest.mark.ledger]

DONE = 2
CHILD = (sys.executable, "-m", "tests.faults.child")


def _acknowledged(rt: Runtime) -> dict[str, list[object]]:
    """The epochs each stage has committed: what the ledger acknowledged."""
    return {s: list(rt.ledger.done_epochs("bank", s)) for s in rt.pipeline.stages}


def _set_aside(ledger: Path, backup: Path) -> None:
    """Delete the ledger file, keeping its content under ``backup`` (a second name)."""
    os.link(ledger, backup)
    ledger.unlink()


def _restore(ledger: Path, backup: Path) -> None:
    os.link(backup, ledger)
    backup.unlink()


def _finish_without_file(rt: Runtime, worked: Worked, backup: Path) -> None:
    """Commit ``worked`` in a session during which the ledger file is deleted."""
    with rt.ledger.session():
        _set_aside(rt.ledger.path, backup)
        rt.executor.finish(worked)


@pytest.mark.spark
def test_a_deleted_or_unwritable_ledger_file_is_named_and_nothing_acknowledged_is_lost(
    tmp_path: Path, spark: SparkSession, recorder: Recorder
) -> None:
    campaign = recorder.campaign("ledger files")
    home = new_home(tmp_path / "home", epochs=3, rows=30, accounts=6)
    rt = home.runtime(spark)
    send_epoch(rt, home.data, 0)
    rt.run()
    send_epoch(rt, home.data, 1)
    before = invariants.snapshot(rt)
    acknowledged = _acknowledged(rt)
    ledger, backup = home.ledger_path, tmp_path / "backup.duckdb"

    # Deleted between two runs: refused, and not created again empty.
    _set_aside(ledger, backup)
    with pytest.raises(LedgerMissingError) as missing:
        rt.run_stage("valid_cards", 1)
    err = missing.value
    assert isinstance(err, EpochgateError)
    assert (err.path, err.stage, err.epoch) == (str(ledger), "valid_cards", 1)
    assert "restore it" in str(err)
    assert "nothing was committed" in str(err)
    with pytest.raises(LedgerMissingError):
        rt.run()
    assert not ledger.exists()
    _restore(ledger, backup)

    # Deleted while a run's session holds it, before its commit: rolled back.
    with rt.ledger.session():
        admitted = rt.executor.admit("valid_cards", 1)
    assert isinstance(admitted, Admitted)
    worked = rt.executor.work(admitted)
    with pytest.raises(LedgerMissingError) as missing:
        _finish_without_file(rt, worked, backup)
    assert (missing.value.stage, missing.value.epoch) == ("valid_cards", 1)
    _restore(ledger, backup)
    assert _acknowledged(rt) == acknowledged
    assert rt.ledger.verify("bank").ok

    # Made unwritable, the ledger file and then its lock file.
    lock = ledger.with_name(ledger.name + ".lock")
    for target in (ledger, lock):
        rt.ledger.release()  # between runs: the next one opens them again
        with unwritable(target) as how:
            with pytest.raises(LedgerUnwritableError) as refused:
                rt.run()
            assert refused.value.path == str(target), how
            assert "cannot be written" in str(refused.value)
        assert _acknowledged(rt) == acknowledged

    clock = time.monotonic()
    rt.run()
    campaign.recovered(time.monotonic() - clock)
    tally = invariants.check_all(rt, None, home, DONE, before)
    campaign.checked(tally)
    assert tally.problems == []
    assert (tally.lost, tally.doubled) == (0, 0)


def _no_spark() -> SparkSession:
    raise AssertionError("moving input workers needs no Spark")


def _advance_under_a_lost_lock(
    rt: Runtime, lock: Path
) -> tuple[subprocess.Popen[str], LedgerLockLostError]:
    """In one session: delete the lock file, start another process that moves wire worker 0
    to epoch 2 (it locks a new lock file and waits to attach the ledger), then move card
    worker 0 to epoch 2 here; returns that process and the error the advance raised."""
    with rt.ledger.session():
        lock.unlink()
        other = subprocess.Popen(
            [*CHILD, str(rt.ledger.path.parent), "advance", "wire_transfers", "0", "2"],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        # It has locked the new lock file, and DuckDB refused its attach: it marks its wait.
        wait_until(
            lambda: other.poll() is not None or (lock.exists() and wanted(rt.ledger.path)),
            180,
            "the other process waiting to attach the ledger",
        )
        assert other.poll() is None, other.communicate()  # it waits: the ledger is attached
        try:
            rt.input("card_payments", 0).advance_to(2)
        except LedgerLockLostError as err:
            return other, err
    other.kill()
    raise AssertionError("an advance under a lost lock was committed")


def test_a_lock_file_deleted_while_held_lets_no_second_writer_in(
    tmp_path: Path, recorder: Recorder
) -> None:
    campaign = recorder.campaign("ledger files")
    home: Home = new_home(tmp_path / "home", epochs=3, rows=30, accounts=6)
    rt = Runtime(pipeline(), Ledger(home.ledger_path), _no_spark, tmp_path / "data")
    send_epoch(rt, home.data, 0)
    lock = home.ledger_path.with_name(home.ledger_path.name + ".lock")
    other, lost = _advance_under_a_lost_lock(rt, lock)
    assert lost.path == str(lock)
    assert "rolled back" in str(lost)
    out, err = other.communicate(timeout=300)
    assert other.returncode == 0, err[-3000:]
    assert "done" in out

    clock = time.monotonic()
    assert rt.input("card_payments", 0).epoch == 1  # refused: not committed
    assert rt.input("wire_transfers", 0).epoch == 2  # the other writer's, after this one's
    assert rt.ledger.verify("bank").ok
    rt.input("card_payments", 0).advance_to(2)  # and this process goes on with the new lock
    campaign.recovered(time.monotonic() - clock)
    tally = invariants.Tally()
    tally.check(rt.ledger.verify("bank").ok, "ledger verify of bank failed")
    campaign.checked(tally)


def test_a_waiter_whose_lock_file_is_deleted_locks_the_file_at_the_path(tmp_path: Path) -> None:
    path = tmp_path / "ledger.duckdb.lock"
    first = LedgerLock(path, 30.0)
    first.acquire()
    second = LedgerLock(path, 30.0)
    waiting = threading.Thread(target=second.acquire)
    waiting.start()
    wait_until(lambda: blocked(path), 10, "the second lock's wait for the first")
    path.unlink()
    assert not first.intact()
    third = LedgerLock(path, 1.0)
    third.acquire()  # a new lock file, free
    assert third.intact()
    first.release()  # the waiter wins the deleted file's lock, lets it go, waits for the new one
    wait_until(lambda: blocked(path), 10, "the second lock's wait for the new lock file")
    assert waiting.is_alive()
    third.release()
    waiting.join(10.0)
    assert not waiting.is_alive()
    assert second.intact()
    second.release()
