"""Marks: how far a reader of a stage's messages has seen them all, so it looks again only at
what was committed since.

A reader (named by a string of its own: a sink's format and place, ``pipelines.run.sinks``)
marks a stage with a batch: every current message of the stage committed in that batch or
before it was seen, and acted on, when the mark was written. Its next look asks for the current
messages of later batches only, so its cost follows what is new, not the stage's history. A
message made current later (a revision, a correction) is committed in a new batch, after any
mark. A reader that changes its name (a sink given another path) has no mark: it sees every
message again.
"""

from __future__ import annotations

from progress.ledger.queries import MESSAGE_COLUMNS, message_record
from progress.ledger.records import MessageRecord
from progress.ledger.sessions import Session


def unmarked(s: Session, pipeline: str, stage: str, port: int, reader: str) -> list[MessageRecord]:
    """The current messages of ``(stage, port)`` committed after ``reader``'s mark (all of
    them without one), in time order."""
    rows = s.rows(
        f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE pipeline = ? AND stage = ? AND port = ? "
        "AND current AND batch_id > coalesce((SELECT through FROM marks WHERE pipeline = ? "
        "AND stage = ? AND reader = ?), 0) ORDER BY t0, t1, batch_id",
        [pipeline, stage, port, pipeline, stage, reader],
    )
    return [message_record(r) for r in rows]


def mark(s: Session, pipeline: str, stage: str, reader: str, through: int) -> None:
    """Record that ``reader`` has seen every current message of ``stage`` committed through
    batch ``through`` (a mark never moves back)."""
    s.con.execute(
        "INSERT INTO marks VALUES (?, ?, ?, ?) ON CONFLICT (pipeline, stage, reader) "
        "DO UPDATE SET through = greatest(marks.through, excluded.through)",
        [pipeline, stage, reader, through],
    )
