"""A state file that stays attached between uses: other holders get it at once and see exactly
what was written, counters and read marks that reads put off included."""

from __future__ import annotations

import gc
import multiprocessing
import time
from pathlib import Path

import pytest

from state_store import KeyedState, PartialKeys
from tests.lock_files import free, wait_free

pytestmark = pytest.mark.ledger


def setup(store: KeyedState) -> None:
    with store.connect() as con:
        con.execute("CREATE TABLE things (n BIGINT)")
        con.execute('CREATE TABLE "p__s__present" (account BIGINT, _read BIGINT, _since BIGINT)')
        con.execute('INSERT INTO "p__s__present" VALUES (1, 0, 0), (2, 0, 0), (3, 0, 0)')


def things(store: KeyedState) -> list[int]:
    with store.connect(reading=True) as con:
        return [r[0] for r in con.execute("SELECT n FROM things ORDER BY n").fetchall()]


def write_and_count(path: str, value: int, out: multiprocessing.Queue[object]) -> None:
    """In another process: insert ``value`` (timing the wait for the file) and report the
    counters and read marks found."""
    store = KeyedState(path, lock_timeout=20, linger=0)
    started = time.monotonic()
    with store.connect() as con:
        waited = time.monotonic() - started
        con.execute("INSERT INTO things VALUES (?)", [value])
        hits = con.execute("SELECT coalesce(sum(hits), 0) FROM partial_stats").fetchall()[0][0]
        marked = con.execute(
            'SELECT account FROM "p__s__present" WHERE _read > 0 ORDER BY account'
        ).fetchall()
    out.put((waited, int(hits), [r[0] for r in marked]))


def test_another_process_gets_a_lingering_file_at_once_with_what_reads_put_off(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.duckdb"
    store = KeyedState(path, linger=60)
    setup(store)
    assert things(store) == []
    store.count_later("p", "s", hits=3)
    store.mark_later("p", "s", ["account"], [(2,), (9,)])  # 9 is not present: nothing to mark
    assert not free(path)  # still held, for the next read
    context = multiprocessing.get_context("spawn")
    out: multiprocessing.Queue[object] = context.Queue()
    child = context.Process(target=write_and_count, args=(str(path), 7, out))
    child.start()
    try:
        waited, hits, marked = out.get(timeout=120)  # type: ignore[misc]
    finally:
        child.join(30)
    assert waited < 5  # not the 60 s of the linger
    assert (hits, marked) == (3, [2])  # written before the file was let go
    assert things(store) == [7]  # the next read sees the other process's write


def test_counts_are_exact_in_the_holder_and_a_write_forgets_what_reads_remembered(
    tmp_path: Path,
) -> None:
    store = KeyedState(tmp_path / "state.duckdb", linger=60)
    setup(store)
    reads = PartialKeys(store)
    found = reads.read("p", "s", ["account"], [(1,), (4,)], None, partial=True)
    assert found.present == frozenset()
    assert found.last_epoch is None
    store.count_later("p", "s", hits=2, misses=1)
    counts = reads.counts("p", "s", partial=True)
    assert (counts.hits, counts.misses, counts.present_keys) == (2, 1, 3)
    calls: list[int] = []

    def remember() -> int:
        with store.connect(reading=True):
            return int(store.remembered("k", lambda: calls.append(1) or len(calls)))

    assert (remember(), remember()) == (1, 1)  # computed once while nothing changed
    with store.connect() as con:
        con.execute("INSERT INTO things VALUES (1)")
    assert remember() == 2


def test_a_lingering_hold_ends_after_the_linger_even_of_a_forgotten_store(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.duckdb"
    store = KeyedState(path, linger=0.05)
    setup(store)
    store.count_later("p", "s", hits=1)
    assert wait_free(path)
    other = KeyedState(path, linger=0)
    assert PartialKeys(other).counts("p", "s", partial=True).hits == 1
    store.release()  # nothing held: nothing to do
    forgotten = KeyedState(path, linger=0.05)
    forgotten.count_later("p", "s", hits=2)
    assert things(forgotten) == []
    del forgotten
    gc.collect()
    assert wait_free(path)
    assert PartialKeys(other).counts("p", "s", partial=True).hits == 3
