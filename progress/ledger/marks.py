"""Marks: how far a reader of a stage's messages has seen them all, so it looks again only at
what was committed since.

A reader names itself with a string (a sink: its format and the identity of the place it
publishes to, ``pipelines.run.sinks``) and marks a stage's port with a batch: every current
message there committed in that batch or before it was seen, and acted on, when the mark was
written. Its next look asks for the current messages of later batches only, so its cost follows
what is new, not the stage's history. A message made current later (a revision, a correction)
is committed in a new batch, after any mark. A port keeps one mark, the last reader's: a reader
of another name (a sink moved, its place made anew) finds none and sees every message again.
"""

from __future__ import annotations

from progress.ledger.queries import MESSAGE_COLUMNS, message_record
from progress.ledger.records import MessageRecord
from progress.ledger.sessions import Session


def unmarked(s: Session, pipeline: str, stage: str, port: int, reader: str) -> list[MessageRecord]:
    """The current messages of ``(stage, port)`` committed after ``reader``'s mark (all of
    them when the port has no mark of that reader's), in time order; read once per hold until
    this process changes the port (``HoldCache.unmarked``)."""
    key = (pipeline, stage, port, reader)
    found = s.cache.unmarked.get(key)
    if found is None:
        rows = s.rows(
            f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE pipeline = ? AND stage = ? "
            "AND port = ? AND current AND batch_id > coalesce((SELECT through FROM marks "
            "WHERE pipeline = ? AND stage = ? AND port = ? AND reader = ?), 0) "
            "ORDER BY t0, t1, batch_id",
            [pipeline, stage, port, pipeline, stage, port, reader],
        )
        found = s.cache.unmarked[key] = tuple(message_record(r) for r in rows)
    return list(found)


def mark(s: Session, pipeline: str, stage: str, port: int, reader: str, *, through: int) -> None:
    """Record that ``reader`` has seen every current message of ``(stage, port)`` committed
    through batch ``through``: its mark never moves back; another reader's is replaced."""
    s.cache.changed(pipeline, stage, port, None)
    s.con.execute(
        "INSERT INTO marks VALUES (?, ?, ?, ?, ?) ON CONFLICT (pipeline, stage, port) DO UPDATE "
        "SET through = CASE WHEN marks.reader = excluded.reader "
        "THEN greatest(marks.through, excluded.through) ELSE excluded.through END, "
        "reader = excluded.reader",
        [pipeline, stage, port, reader, through],
    )
