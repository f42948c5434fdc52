"""The batch writer: a progress batch, its messages and their lineage, in one transaction.

A batch is its header (``batches``), its updates (the append-only log) and the catalog entries of
the messages it announces. Every ``COMPACT_EVERY`` batches the log is folded into the counts
table, where only non-zero pointstamps are kept, so reading counts costs what is open, not how
many epochs have closed.
"""

from __future__ import annotations

from collections.abc import Sequence

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
    con = s.con
    compacted: ChangeBatch[tuple[int, str, int, int, int]] = ChangeBatch()
    for location, time, delta in batch:
        if location not in graph.index:
            raise ForeignLocationError(pipeline, location, key)
        validate_time(time, graph.minimum)
        compacted.update((*location_columns(location), *time_to_columns(time)), delta)
    for m in messages:
        graph.node(m.stage)
        validate_time(m.time, graph.minimum)
    rows = compacted.items()
    s.wrote(pipeline)
    s.cache.uncommitted.discard((pipeline, key))
    o0, o1 = time_to_columns(origin.time) if origin.time is not None else (None, None)
    run = None if origin.run is None else origin.run.value
    batch_id: int = con.execute(
        "INSERT INTO batches (batch_id, pipeline, key, origin, node, worker, t0, t1, n_updates, "
        "committed_at, run_kind) VALUES (nextval('batch_ids'), ?, ?, ?, ?, ?, ?, ?, ?, now(), ?) "
        "RETURNING batch_id",
        [pipeline, key, origin.kind.value, origin.node, origin.worker, o0, o1, len(rows), run],
    ).fetchone()[0]
    if rows:
        # One list parameter per column: far cheaper to bind than a row of parameters each.
        columns = [list(c) for c in zip(*[(*item, delta) for item, delta in rows], strict=True)]
        con.execute(
            "INSERT INTO updates SELECT ?, ?, unnest(?), unnest(?), unnest(?), unnest(?), "
            "unnest(?), unnest(?)",
            [batch_id, pipeline, *columns],
        )
        s.cache.counted(pipeline, graph, rows)
    if batch_id - s.watermark() >= COMPACT_EVERY:
        fold(s, batch_id)
    for m in messages:
        t0, t1 = time_to_columns(m.time)
        if m.replaces:
            replace(s, pipeline, m)
        con.execute(
            "INSERT INTO messages VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, true)",
            [pipeline, m.stage, m.port, t0, t1, m.attempt, m.path, m.rows, m.bytes, batch_id],
        )
        at = time_from_columns(t0, t1)  # as a read gives it
        record = MessageRecord(
            m.stage, m.port, at, m.attempt, m.path, m.rows, m.bytes, batch_id, True
        )
        s.cache.added(pipeline, record, (t0, t1))
        if m.reads:
            r0, r1 = time_to_columns(m.run_time if m.run_time is not None else m.time)
            refs = [(r.stage, r.port, *time_to_columns(r.time), r.attempt) for r in m.reads]
            columns = [list(c) for c in zip(*refs, strict=True)]
            con.execute(
                "INSERT INTO reads SELECT ?, ?, ?, ?, ?, ?, unnest(?), unnest(?), "
                "unnest(?), unnest(?), unnest(?)",
                [pipeline, batch_id, m.stage, r0, r1, m.attempt, *columns],
            )
    return CommitResult(batch_id, key, repeated=False)


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
