"""One writer of a stateful stage's state at a time, across processes."""

from __future__ import annotations

import multiprocessing
import multiprocessing.synchronize
import os
import time
from pathlib import Path

import pytest

from state_store import KeyedState, StateStoreError

pytestmark = pytest.mark.ledger


def hold_writer(path: str, seconds: float, ready: multiprocessing.synchronize.Event) -> None:
    with KeyedState(path).writer("bank", "balances"):
        ready.set()
        time.sleep(seconds)  # the point: the lock is held a while, then let go by itself


def test_another_process_waits_and_a_timeout_names_the_holder(tmp_path: Path) -> None:
    path = str(tmp_path / "state.duckdb")
    ready = multiprocessing.get_context("spawn").Event()
    child = multiprocessing.get_context("spawn").Process(
        target=hold_writer, args=(path, 3.0, ready)
    )
    child.start()
    try:
        assert ready.wait(60)
        store = KeyedState(path)
        with pytest.raises(StateStoreError) as raised, store.writer("bank", "balances", 0.5):
            pass
        assert "stateful stage 'balances' of bank" in str(raised.value)
        assert f"process {child.pid}" in str(raised.value)
        with store.writer("bank", "balances"):  # waits for the child, then holds it
            assert store.writer_lock_path("bank", "balances").read_text() == str(os.getpid())
        with store.writer("bank", "category_totals", timeout=0.5):
            pass  # another stage's writer is not held by anyone
    finally:
        child.join(30)


def test_nested_holds_take_the_lock_once(tmp_path: Path) -> None:
    store = KeyedState(tmp_path / "state.duckdb")
    other = KeyedState(tmp_path / "state.duckdb")
    with store.writer("bank", "balances"):
        with store.writer("bank", "balances"):
            pass
        # still held after the inner hold ends
        with pytest.raises(StateStoreError), other.writer("bank", "balances", 0.2):
            pass
    with other.writer("bank", "balances", timeout=0.2):
        pass
