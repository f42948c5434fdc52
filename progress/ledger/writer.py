"""The batch writer: a progress batch, its messages and their lineage, in one transaction.

A batch is its header (``batches``), its updates (the append-only log) and the catalog entries of
the messages it announces. Every ``COMPACT_EVERY`` batches the log is folded into the counts
table, where only non-zero pointstamps are kept, so reading counts costs what is open, not how
many epochs have closed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from progress.change_batch import ChangeBatch
from progress.errors import ForeignLocationError
from progress.graph import Graph
from progress.ledger.records import CommitResult, MessageEntry, MessageRecord, Origin
from progress.ledger.schema import location_columns
from progress.ledger.sessions import Session
from progress.timestamp import time_from_columns, time_to_columns, validate_time
from progress.tracker import Update

COMPACT_EVERY = 64
"""Fold the log into the counts table once this many batches have been committed since."""


def commit(
    s: Session,
    pipeline: str,
    batch: list[Update],
    *,
    key: str,
    messages: Sequence[MessageEntry],
    origin: Origin,
) -> CommitResult:
    """Write ``batch`` under ``key`` unless a batch was committed under it already (then return
    that one); updates to locations outside the registered graph are refused."""
    first = committed(s, pipeline, key)
    if first is not None:
        return first
    return write_batch(
        s,
        pipeline=pipeline,
        graph=s.graph(pipeline),
        batch=batch,
        key=key,
        origin=origin,
        messages=messages,
    )


COMMITTED_SQL = "SELECT batch_id FROM batches WHERE pipeline = ? AND key = ?"
"""Whether a key is committed: asked before every commit, answered through the index on ``key``
(schema 10), not by reading every batch."""


def committed(s: Session, pipeline: str, key: str) -> CommitResult | None:
    """The commit made under ``key``, if any (no query when this hold knows there is none)."""
    if (pipeline, key) in s.cache.uncommitted:
        return None
    row = s.row(COMMITTED_SQL, [pipeline, key])
    if row is None:
        s.cache.uncommitted.add((pipeline, key))
        return None
    return CommitResult(row[0], key, repeated=True)


@dataclass(frozen=True)
class Pending:
    """A batch to write: its updates, its key, who made it and the messages it announces."""

    batch: list[Update]
    key: str
    origin: Origin
    messages: Sequence[MessageEntry] = ()


def write_batch(
    s: Session,
    *,
    pipeline: str,
    graph: Graph,
    batch: list[Update],
    key: str,
    origin: Origin,
    messages: Sequence[MessageEntry],
) -> CommitResult:
    """Validate and write one batch with its messages; nothing is written if any is invalid."""
    return write_batches(s, pipeline, graph, [Pending(batch, key, origin, messages)])[0]


def write_batches(
    s: Session, pipeline: str, graph: Graph, pending: Sequence[Pending]
) -> list[CommitResult]:
    """Validate and write batches of ``pipeline``, in order, with their messages: one statement
    for their headers and one for their updates, whatever their number (each statement costs
    about a millisecond). Nothing is written if any is invalid."""
    if not pending:
        return []
    columns: list[list[tuple[int, str, int, int, int, int]]] = []
    for p in pending:
        columns.append(_validated(pipeline, graph, p))
    s.wrote(pipeline)
    header = "(nextval('batch_ids'), ?, ?, ?, ?, ?, ?, ?, ?, now(), ?)"
    params: list[object] = []
    for p, rows in zip(pending, columns, strict=True):
        s.cache.uncommitted.discard((pipeline, p.key))
        o0, o1 = time_to_columns(p.origin.time) if p.origin.time is not None else (None, None)
        run = None if p.origin.run is None else p.origin.run.value
        params += [pipeline, p.key, p.origin.kind.value, p.origin.node, p.origin.worker]
        params += [o0, o1, len(rows), run]
    ids = dict(
        s.rows(
            "INSERT INTO batches (batch_id, pipeline, key, origin, node, worker, t0, t1, "
            f"n_updates, committed_at, run_kind) VALUES {', '.join([header] * len(pending))} "
            "RETURNING key, batch_id",
            params,
        )
    )
    batch_ids = [int(ids[p.key]) for p in pending]
    updates = [(b, *row) for b, rows in zip(batch_ids, columns, strict=True) for row in rows]
    if updates:
        # One list parameter per column: far cheaper to bind than a row of parameters each.
        lists = [list(c) for c in zip(*updates, strict=True)]
        s.con.execute(
            "INSERT INTO updates SELECT unnest(?), ?, unnest(?), unnest(?), unnest(?), "
            "unnest(?), unnest(?), unnest(?)",
            [lists[0], pipeline, *lists[1:]],
        )
        s.cache.counted(pipeline, graph, [(row[:5], row[5]) for rows in columns for row in rows])
    if max(batch_ids) - s.watermark() >= COMPACT_EVERY:
        fold(s, max(batch_ids))
    for p, batch_id in zip(pending, batch_ids, strict=True):
        for m in p.messages:
            _catalog(s, pipeline, m, batch_id)
    return [CommitResult(b, p.key, repeated=False) for p, b in zip(pending, batch_ids, strict=True)]


def _validated(
    pipeline: str, graph: Graph, p: Pending
) -> list[tuple[int, str, int, int, int, int]]:
    """The rows of ``p``'s updates, compacted: ``(kind, node, port, t0, t1, delta)``; updates
    to locations outside ``graph``, or a time or message it refuses, raise."""
    compacted: ChangeBatch[tuple[int, str, int, int, int]] = ChangeBatch()
    for location, time, delta in p.batch:
        if location not in graph.index:
            raise ForeignLocationError(pipeline, location, p.key)
        validate_time(time, graph.minimum)
        compacted.update((*location_columns(location), *time_to_columns(time)), delta)
    for m in p.messages:
        graph.node(m.stage)
        validate_time(m.time, graph.minimum)
    return [(*item, delta) for item, delta in compacted.items()]


def _catalog(s: Session, pipeline: str, m: MessageEntry, batch_id: int) -> None:
    """Catalog message ``m`` of batch ``batch_id`` (after what it replaces), with its reads."""
    con = s.con
    t0, t1 = time_to_columns(m.time)
    if m.replaces:
        replace(s, pipeline, m)
    con.execute(
        "INSERT INTO messages VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, true)",
        [pipeline, m.stage, m.port, t0, t1, m.attempt, m.path, m.rows, m.bytes, batch_id],
    )
    at = time_from_columns(t0, t1)  # as a read gives it
    record = MessageRecord(m.stage, m.port, at, m.attempt, m.path, m.rows, m.bytes, batch_id, True)
    s.cache.added(pipeline, record, (t0, t1))
    if m.reads:
        r0, r1 = time_to_columns(m.run_time if m.run_time is not None else m.time)
        refs = [(r.stage, r.port, *time_to_columns(r.time), r.attempt) for r in m.reads]
        lists = [list(c) for c in zip(*refs, strict=True)]
        con.execute(
            "INSERT INTO reads SELECT ?, ?, ?, ?, ?, ?, unnest(?), unnest(?), "
            "unnest(?), unnest(?), unnest(?)",
            [pipeline, batch_id, m.stage, r0, r1, m.attempt, *lists],
        )


def replace(s: Session, pipeline: str, m: MessageEntry) -> None:
    """Make the current messages that ``m`` replaces old: every one at its ``(stage, port,
    time)``, or only those input worker ``m.worker`` sent there (the batches that catalogued an
    input's messages, its sends, seals and corrections, record the worker)."""
    t0, t1 = time_to_columns(m.time)
    where = [pipeline, m.stage, m.port, t0, t1]
    by_worker = ""
    if m.worker is not None:
        by_worker = (
            " AND batch_id IN (SELECT batch_id FROM batches "
            "WHERE pipeline = ? AND node = ? AND worker = ?)"
        )
        where += [pipeline, m.stage, m.worker]
    s.cache.replaced[pipeline] = True
    s.cache.changed(pipeline, m.stage, m.port, (t0, t1))
    s.con.execute(
        "UPDATE messages SET current = false WHERE pipeline = ? AND stage = ? "
        f"AND port = ? AND t0 = ? AND t1 = ? AND current{by_worker}",
        where,
    )


def compact(s: Session) -> None:
    """Fold every committed batch into the counts table now."""
    row = s.row("SELECT coalesce(max(batch_id), 0) FROM batches")
    assert row is not None
    if row[0] > s.watermark():
        fold(s, row[0])


def fold(s: Session, through: int) -> None:
    """Fold the updates of batches after the watermark, up to ``through``, into counts."""
    s.con.execute(
        """
        MERGE INTO counts c USING (
            SELECT pipeline, kind, node, port, t0, t1, sum(delta) AS delta FROM updates
            WHERE batch_id > ? AND batch_id <= ? GROUP BY ALL HAVING sum(delta) <> 0
        ) n
        ON c.pipeline = n.pipeline AND c.kind = n.kind AND c.node = n.node
           AND c.port = n.port AND c.t0 = n.t0 AND c.t1 = n.t1
        WHEN MATCHED AND c.count + n.delta = 0 THEN DELETE
        WHEN MATCHED THEN UPDATE SET count = c.count + n.delta
        WHEN NOT MATCHED THEN
            INSERT VALUES (n.pipeline, n.kind, n.node, n.port, n.t0, n.t1, n.delta)
        """,
        [s.watermark(), through],
    )
    s.folded(through)
