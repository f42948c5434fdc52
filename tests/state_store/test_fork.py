"""A state store's work put off before a fork (counters of reads) is the parent's to write:
a child that uses the store does not write it a second time."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from multiprocessing.queues import Queue
from pathlib import Path

import pytest

from progress.ledger.lock import LedgerLock
from state_store.keyed import KeyedState
from tests.waiting import wait_until

pytestmark = pytest.mark.ledger

FORK = multiprocessing.get_context("fork")


def _use_state(state: KeyedState, said: Queue[str]) -> None:
    with state.connect():
        pass  # writes what it put off: the parent's, had the child kept them
    said.put("used")


@pytest.mark.parametrize("linger", [30.0, 0.0])
def test_what_a_state_store_put_off_is_written_once_by_the_parent_not_again_by_a_child(
    tmp_path: Path, linger: float
) -> None:
    state = KeyedState(tmp_path / "state.duckdb", linger=linger)
    with state.connect():
        pass  # created (and lingering, with a linger)
    state.count_later("bank", "balances", hits=5)
    said: Queue[str] = FORK.Queue()
    child = FORK.Process(target=_use_state, args=(state, said))
    child.start()
    child.join(60)
    assert said.get(timeout=10) == "used"
    with state.connect() as con:
        found = con.execute(
            "SELECT sum(hits) FROM partial_stats WHERE pipeline = 'bank' AND stage = 'balances'"
        ).fetchone()
    state.release()
    assert found == (5,)


def _fork_inside_a_writer(state: KeyedState, ready: Queue[int]) -> None:
    """Hold ``bank.balances``' writer lock, fork a child that outlives this process, wait."""
    with state.writer("bank", "balances"):
        child = FORK.Process(target=time.sleep, args=(60,), daemon=False)
        child.start()
        ready.put(child.pid or 0)
        time.sleep(60)  # the point: it holds the lock until it is killed


def test_a_writer_lock_dies_with_its_process_even_when_a_forked_child_lives_on(
    tmp_path: Path,
) -> None:
    state = KeyedState(tmp_path / "state.duckdb", linger=0)
    ready: Queue[int] = FORK.Queue()
    parent = FORK.Process(target=_fork_inside_a_writer, args=(state, ready))
    parent.start()
    child = ready.get(timeout=60)
    try:
        os.kill(parent.pid or 0, signal.SIGKILL)
        # Not join(): the child keeps its copy of the parent's sentinel open.
        wait_until(lambda: parent.exitcode is not None, 60, "the killed writer's end", every=0.01)
        lock = LedgerLock(state.writer_lock_path("bank", "balances"), timeout=5)
        lock.acquire()  # not kept by the child's copy of the dead parent's descriptor
        lock.release()
    finally:
        os.kill(child, signal.SIGKILL)
