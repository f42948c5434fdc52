"""A revision's rewind of a keyed stage's state: while its commits have not brought ``latest``
back to the last epoch, reads take the state from ``history`` (what the committed epochs hold,
never the rewound state under the last epoch's name), and a revision stopped before it caught up
leaves a state that the next run restores before it carries on."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from state_store import KeyedState, PartialKeys
from state_store.keyed import ident

pytestmark = pytest.mark.ledger

P, S, KEY = "rewinds", "totals", ("account",)
ROWS = pa.schema([("account", pa.int64()), ("total", pa.int64())])


def commit_epoch(
    state: KeyedState, root: Path, epoch: int, rows: dict[int, int], attempt: str
) -> None:
    """Stage and commit ``rows`` (account -> total) as the state's rows at ``epoch``."""
    path = root / f"{attempt}.parquet"
    pq.write_table(pa.table({"account": list(rows), "total": list(rows.values())}, ROWS), path)
    state.stage(P, S, epoch, attempt, str(path))
    state.commit(P, S, KEY, attempt)


def totals(state: KeyedState, as_of: int | None = None) -> dict[int, int]:
    read = PartialKeys(state).read(P, S, KEY, [(1,), (2,), (3,)], as_of, partial=False)
    return {row["account"]: row["total"] for row in read.rows}


def rewound(state: KeyedState) -> bool:
    with state.connect(reading=True) as con:
        return KeyedState.rewound(con, P, S)


def latest(state: KeyedState) -> dict[int, int]:
    """What the next run carries on from."""
    with state.connect(reading=True) as con:
        rows = con.execute(f"SELECT account, total FROM {ident(P, S, 'latest')}").fetchall()
    return dict(rows)


@pytest.fixture
def state(tmp_path: Path) -> KeyedState:
    found = KeyedState(tmp_path / "state.duckdb")
    commit_epoch(found, tmp_path, 0, {1: 10}, "a0")
    commit_epoch(found, tmp_path, 1, {1: 11, 2: 20}, "a1")
    commit_epoch(found, tmp_path, 2, {3: 30}, "a2")
    return found


def test_reads_during_a_revision_see_the_committed_epochs_not_the_rewound_state(
    state: KeyedState, tmp_path: Path
) -> None:
    assert (totals(state), rewound(state)) == ({1: 11, 2: 20, 3: 30}, False)
    state.rewind(P, S, KEY, 1)  # a revision from epoch 1: the state as of 0
    assert (latest(state), rewound(state)) == ({1: 10}, True)
    assert totals(state) == {1: 11, 2: 20, 3: 30}  # the last epoch, as committed
    assert totals(state, as_of=0) == {1: 10}
    commit_epoch(state, tmp_path, 1, {1: 12, 2: 21}, "r1")  # the revision's first epoch
    assert rewound(state)
    assert totals(state) == {1: 12, 2: 21, 3: 30}
    commit_epoch(state, tmp_path, 2, {3: 31}, "r2")  # caught up with the last epoch
    assert not rewound(state)
    assert latest(state) == totals(state) == {1: 12, 2: 21, 3: 31}


def test_a_revision_stopped_before_it_caught_up_is_restored_by_the_next_run(
    state: KeyedState, tmp_path: Path
) -> None:
    state.rewind(P, S, KEY, 1)  # then the revision's process is killed: nothing committed
    assert state.restore(P, S, KEY)
    assert (latest(state), rewound(state)) == ({1: 11, 2: 20, 3: 30}, False)
    assert not state.restore(P, S, KEY)  # nothing left to restore

    state.rewind(P, S, KEY, 1)
    commit_epoch(state, tmp_path, 1, {1: 12, 2: 21}, "r1")  # killed after its first epoch
    assert state.restore(P, S, KEY)  # what the epochs commit now hold: the new 1, the old 2
    assert latest(state) == totals(state) == {1: 12, 2: 21, 3: 30}
