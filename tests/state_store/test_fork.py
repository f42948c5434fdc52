"""A state store's work put off before a fork (counters of reads) is the parent's to write:
a child that uses the store does not write it a second time."""

from __future__ import annotations

import multiprocessing
from multiprocessing.queues import Queue
from pathlib import Path

import pytest

from state_store.keyed import KeyedState

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
