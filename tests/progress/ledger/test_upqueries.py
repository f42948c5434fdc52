"""Pending upqueries in the ledger: recorded once per key and epoch, listed, marked filled."""

from __future__ import annotations

import duckdb
import pytest

from progress.errors import UnknownNodeError
from progress.ledger import Ledger

pytestmark = pytest.mark.ledger


def test_a_pending_read_is_recorded_once_listed_and_marked_filled(ledger: Ledger) -> None:
    first = ledger.request_upqueries("bank", "totals", ["[1]", "[2]", "[1]"], 3)
    assert [(r.stage, r.key, r.as_of, r.filled_at) for r in first] == [
        ("totals", "[1]", 3, None),
        ("totals", "[2]", 3, None),
    ]
    again = ledger.request_upqueries("bank", "totals", ["[2]", "[3]"], 3)
    assert again[0] == first[1]  # pending already: not recorded twice
    other_epoch = ledger.request_upqueries("bank", "totals", ["[1]"], 4)
    assert other_epoch[0].upquery_id not in {r.upquery_id for r in first}
    ledger.request_upqueries("bank", "validate", ['["x"]'], 0)

    pending = ledger.pending_upqueries("bank", "totals")
    assert [(r.key, r.as_of) for r in pending] == [("[1]", 3), ("[2]", 3), ("[3]", 3), ("[1]", 4)]
    assert len(ledger.pending_upqueries("bank")) == 5
    assert ledger.pending_upqueries("shop") == []

    ids = [r.upquery_id for r in pending[:2]]
    assert ledger.mark_upqueries_filled(ids) == 2
    assert ledger.mark_upqueries_filled(ids) == 0  # filled already
    assert [r.key for r in ledger.pending_upqueries("bank", "totals")] == ["[3]", "[1]"]
    # A key filled once and asked again is a new pending read.
    renewed = ledger.request_upqueries("bank", "totals", ["[1]"], 3)
    assert renewed[0].upquery_id not in ids

    ledger.release()
    con = duckdb.connect(str(ledger.path), read_only=True)
    try:
        rows = con.execute(
            "SELECT key, as_of, filled_at IS NOT NULL FROM upqueries "
            "WHERE stage = 'totals' ORDER BY upquery_id"
        ).fetchall()
    finally:
        con.close()
    assert rows == [
        ("[1]", 3, True),
        ("[2]", 3, True),
        ("[3]", 3, False),
        ("[1]", 4, False),
        ("[1]", 3, False),
    ]


def test_a_read_of_an_unknown_stage_is_refused_with_nothing_recorded(ledger: Ledger) -> None:
    with pytest.raises(UnknownNodeError, match="'balances'"):
        ledger.request_upqueries("bank", "balances", ["[1]"], 0)
    assert ledger.pending_upqueries("bank") == []
