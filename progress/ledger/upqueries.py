"""Pending upqueries: reads of a partial stage that wait for an epoch, kept until filled.

A read as of an epoch the stage has not processed cannot be answered yet; it is recorded here,
one row per key, and an upquery run fills it once the stage has processed that epoch. A key
asked again at the same epoch while its read is pending is not recorded twice.
"""

from __future__ import annotations

from collections.abc import Sequence

from progress.ledger.records import PendingUpquery
from progress.ledger.sessions import Session

COLUMNS = "upquery_id, pipeline, stage, key, as_of, requested_at, filled_at"


def request(
    s: Session, pipeline: str, stage: str, keys: Sequence[str], as_of: int
) -> list[PendingUpquery]:
    """Record a pending read of each key (its values as JSON) at ``as_of``, in the caller's
    transaction; returns the pending read of each key, in the order given (a key already
    pending at that epoch keeps its first record)."""
    s.graph(pipeline).node(stage)  # an unknown stage raises, naming the known ones
    out: list[PendingUpquery] = []
    for key in dict.fromkeys(keys):
        found = s.row(
            f"SELECT {COLUMNS} FROM upqueries WHERE pipeline = ? AND stage = ? AND key = ? "
            "AND as_of = ? AND filled_at IS NULL ORDER BY upquery_id LIMIT 1",
            [pipeline, stage, key, as_of],
        )
        if found is None:
            found = s.row(
                "INSERT INTO upqueries VALUES (nextval('upquery_ids'), ?, ?, ?, ?, now(), NULL) "
                f"RETURNING {COLUMNS}",
                [pipeline, stage, key, as_of],
            )
        assert found is not None
        out.append(PendingUpquery(*found))
    return out


def pending(s: Session, pipeline: str, stage: str | None = None) -> list[PendingUpquery]:
    """The reads of ``pipeline`` (of one stage, when given) not filled yet, oldest first."""
    sql = f"SELECT {COLUMNS} FROM upqueries WHERE pipeline = ? AND filled_at IS NULL"
    params: list[object] = [pipeline]
    if stage is not None:
        sql += " AND stage = ?"
        params.append(stage)
    return [PendingUpquery(*row) for row in s.rows(sql + " ORDER BY upquery_id", params)]


def mark_filled(s: Session, upquery_ids: Sequence[int]) -> int:
    """Mark the pending reads ``upquery_ids`` filled now; returns how many were still pending."""
    if not upquery_ids:
        return 0
    ids = sorted(set(upquery_ids))
    marks = ", ".join("?" for _ in ids)
    row = s.row(
        f"SELECT count(*) FROM upqueries WHERE filled_at IS NULL AND upquery_id IN ({marks})", ids
    )
    s.con.execute(
        "UPDATE upqueries SET filled_at = now() "
        f"WHERE filled_at IS NULL AND upquery_id IN ({marks})",
        ids,
    )
    return int(row[0]) if row else 0
