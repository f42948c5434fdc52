"""Closed epochs written into a ledger directly, so the scaling bench can measure an epoch
behind 100,000 of them without running 100,000 epochs first (days of Spark jobs).

``copy_epoch`` takes what one real epoch left in the ledger (every batch committed from its
first send to its last stage run: the sends, each worker's advance, each stage's run) and
appends it again for each of the following epochs, shifted in time: batches with their updates
and keys, the messages they cataloged, the runs that made them and the lineage they recorded.
Copied messages name the template epoch's data files (the same rows, never read again once
their epoch is closed). Counts are then folded from the whole log, and the workers'
capabilities stand where the copied advances left them, as if every epoch had run.

Only pipelines without keyed state can be extended this way: a stateful stage's history is in
the state store as well.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from progress.ledger import Ledger


@dataclass(frozen=True)
class Template:
    """The batches one real epoch committed: ids ``first .. last``, at ``epoch``."""

    pipeline: str
    epoch: int
    first: int
    last: int


def last_batch(ledger: Ledger) -> int:
    """The id of the newest batch of the ledger (0 when empty)."""
    with ledger._sessions.session() as s:  # a bench reads the log as it stands
        row = s.row("SELECT coalesce(max(batch_id), 0) FROM batches")
    return int(row[0]) if row else 0


def copy_epoch(ledger: Ledger, template: Template, copies: int) -> None:
    """Append ``copies`` epochs after ``template.epoch``, each a shifted copy of it, in one
    transaction; the ledger then holds epochs through ``template.epoch + copies`` closed."""
    if copies <= 0:
        return
    p, e = template.pipeline, template.epoch
    with ledger._sessions.transaction() as s:  # the bench writes history the runs would have
        con: Any = s.con
        con.execute(
            "CREATE TEMP TABLE shifted AS "
            "SELECT j.range AS j, b.batch_id AS old, CAST(NULL AS BIGINT) AS new "
            "FROM range(1, ?) j, batches b "
            "WHERE b.pipeline = ? AND b.batch_id BETWEEN ? AND ? ORDER BY j, old",
            [copies + 1, p, template.first, template.last],
        )
        con.execute("UPDATE shifted SET new = nextval('batch_ids')")
        con.execute(
            """
            INSERT INTO batches
            SELECT m.new, b.pipeline,
                CASE
                    WHEN starts_with(b.key, 'run:') THEN
                        regexp_replace(b.key, ':[0-9]+$', '') || ':' || (b.t0 + m.j)
                    WHEN starts_with(b.key, 'advance:') THEN
                        regexp_replace(b.key, '\\[[0-9]+, -1\\]$', '') || '[' ||
                        (CAST(regexp_extract(b.key, '\\[([0-9]+), -1\\]$', 1) AS BIGINT) + m.j)
                        || ', -1]'
                    ELSE b.key || '~' || m.j
                END,
                b.origin, b.node, b.worker, b.t0 + m.j, b.t1, b.n_updates, b.committed_at,
                b.run_kind
            FROM shifted m JOIN batches b ON b.batch_id = m.old
            """
        )
        con.execute(
            "INSERT INTO updates SELECT m.new, u.pipeline, u.kind, u.node, u.port, u.t0 + m.j, "
            "u.t1, u.delta FROM shifted m JOIN updates u ON u.batch_id = m.old"
        )
        con.execute(
            "INSERT INTO messages SELECT g.pipeline, g.stage, g.port, g.t0 + m.j, g.t1, "
            "g.attempt || '~' || m.j, g.path, g.rows, g.bytes, m.new, g.current "
            "FROM shifted m JOIN messages g ON g.batch_id = m.old"
        )
        con.execute(
            "INSERT INTO reads SELECT r.pipeline, m.new, r.stage, r.t0 + m.j, r.t1, "
            "r.attempt || '~' || m.j, r.input_stage, r.input_port, "
            # an input of the epoch (or a carry of the one before) moves with it; an older
            # one (a dimension's latest message) is read as it is
            "CASE WHEN r.input_t0 >= ? THEN r.input_t0 + m.j ELSE r.input_t0 END, r.input_t1, "
            "CASE WHEN r.input_t0 >= ? THEN r.input_attempt || '~' || m.j "
            "ELSE r.input_attempt END "
            "FROM shifted m JOIN reads r ON r.batch_id = m.old",
            [e - 1, e - 1],
        )
        con.execute(
            "INSERT INTO runs SELECT r.run_id || '~' || m.j, r.pipeline, r.stage, r.t0 + m.j, "
            "r.t1, r.attempt || '~' || m.j, r.status, r.pid, r.started_at, r.finished_at, "
            "m.new, r.error FROM shifted m JOIN runs r ON r.batch_id = m.old"
        )
        con.execute(
            "UPDATE capabilities SET t0 = t0 + ? WHERE pipeline = ? AND t0 IS NOT NULL",
            [copies, p],
        )
        # Fold the whole log into counts: what a compaction would leave.
        con.execute("DELETE FROM counts")
        con.execute(
            "INSERT INTO counts SELECT pipeline, kind, node, port, t0, t1, sum(delta) "
            "FROM updates GROUP BY ALL HAVING sum(delta) <> 0"
        )
        con.execute(
            "UPDATE meta SET value = (SELECT CAST(max(batch_id) AS VARCHAR) FROM batches) "
            "WHERE key = 'counts_through'"
        )
        con.execute("DROP TABLE shifted")
