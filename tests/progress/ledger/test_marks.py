"""Marks (``progress.ledger.marks``): a reader of a stage's messages sees only those committed
since its mark; and a commit's look for its key reads the key's index, not every batch."""

from __future__ import annotations

from collections.abc import Sequence

import duckdb
import pytest

from progress.ledger import Ledger, MessageEntry, Origin, RunKind
from progress.ledger.writer import COMMITTED_SQL
from tests.progress.ledger.scenario import run_epoch

pytestmark = pytest.mark.ledger


def _times(ledger: Ledger, reader: str) -> list[tuple[object, str]]:
    return [(m.time, m.attempt) for m in ledger.unmarked("bank", "totals", 0, reader)]


def test_a_reader_sees_the_messages_committed_after_its_mark_and_a_revision_again(
    ledger: Ledger,
) -> None:
    for epoch in range(3):
        run_epoch(ledger, epoch)
    every = [(e, f"a:totals:{e}") for e in range(3)]
    assert _times(ledger, "sink") == every  # no mark: every current message, in time order
    (first,) = ledger.message("bank", "totals", 0, 1)
    ledger.mark("bank", "totals", 0, "sink", through=first.batch_id)
    assert _times(ledger, "sink") == [(2, "a:totals:2")]
    assert _times(ledger, "elsewhere") == every  # a reader of another name has no mark
    ledger.mark("bank", "totals", 0, "sink", through=first.batch_id - 1)  # never moves back
    assert _times(ledger, "sink") == [(2, "a:totals:2")]

    revised = MessageEntry("totals", 0, 0, "b:totals:0", rows=1, replaces=True)
    origin = Origin.stage("totals", 0, RunKind.REVISION)
    ledger.commit("bank", [], key="revise:totals:0", origin=origin, messages=[revised])
    assert _times(ledger, "sink") == [(0, "b:totals:0"), (2, "a:totals:2")]
    (last,) = ledger.message("bank", "totals", 0, 2)
    ledger.mark("bank", "totals", 0, "sink", through=max(last.batch_id, first.batch_id))
    assert _times(ledger, "sink") == [(0, "b:totals:0")]  # committed after the mark


def test_a_port_keeps_the_last_readers_mark_only(ledger: Ledger) -> None:
    for epoch in range(3):
        run_epoch(ledger, epoch)
    (last,) = ledger.message("bank", "totals", 0, 2)
    ledger.mark("bank", "totals", 0, "here", through=last.batch_id)
    assert _times(ledger, "here") == []
    ledger.mark("bank", "totals", 0, "there", through=1)  # the sink moved: its own mark
    assert _times(ledger, "there") == [(e, f"a:totals:{e}") for e in range(3)]
    every = [(e, f"a:totals:{e}") for e in range(3)]
    assert _times(ledger, "here") == every  # back where it was: that mark is gone


def test_a_commit_looks_its_key_up_through_the_index(ledger: Ledger) -> None:
    for epoch in range(3):
        run_epoch(ledger, epoch)
    path = ledger.path
    ledger.release()
    with duckdb.connect(str(path), read_only=True) as con:
        plan = con.execute(f"EXPLAIN ANALYZE {COMMITTED_SQL}", ["bank", "run:totals:1"]).fetchall()
    assert "Index Scan" in plan[0][1], plan[0][1]


def test_a_reader_looks_once_per_hold_until_this_process_changes_the_port(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Within one hold the unmarked messages are read once: a message this process commits at
    the port joins them with no look; a mark there, or another holder's commit (a new hold),
    makes the next look ask again."""
    from progress.ledger.sessions import Session

    looks: list[str] = []
    rows = Session.rows

    def counted(self: Session, sql: str, params: Sequence[object] = ()) -> object:
        if "FROM marks" in sql:
            looks.append(sql)
        return rows(self, sql, params)

    monkeypatch.setattr(Session, "rows", counted)
    with ledger.held():
        run_epoch(ledger, 0)
        assert _times(ledger, "sink") == [(0, "a:totals:0")]
        assert _times(ledger, "sink") == [(0, "a:totals:0")]
        assert len(looks) == 1
        run_epoch(ledger, 1)  # commits a message at the port: it joins them
        assert _times(ledger, "sink") == [(0, "a:totals:0"), (1, "a:totals:1")]
        assert len(looks) == 1
        # As asked afresh: no mark yet, so every current message of the port.
        assert ledger.unmarked("bank", "totals", 0, "sink") == ledger.messages("bank", "totals", 0)
        assert len(looks) == 1
        (first,) = ledger.message("bank", "totals", 0, 0)
        ledger.mark("bank", "totals", 0, "sink", through=first.batch_id)
        assert _times(ledger, "sink") == [(1, "a:totals:1")]
        assert len(looks) == 2
        run_epoch(Ledger(ledger.path), 2)  # another holder: this hold ends
        assert _times(ledger, "sink") == [(1, "a:totals:1"), (2, "a:totals:2")]
        assert len(looks) == 3
        assert _times(ledger, "sink") == [(1, "a:totals:1"), (2, "a:totals:2")]
        assert len(looks) == 3
