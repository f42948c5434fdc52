"""The ledger's integrity check: counts recomputed from the log, and every batch whole."""

from __future__ import annotations

from progress.ledger.records import CountDifference, PartialBatch, VerifyReport
from progress.ledger.schema import location_from_columns
from progress.ledger.sessions import Session
from progress.timestamp import time_from_columns


def verify(s: Session, pipeline: str | None = None) -> VerifyReport:
    """Recompute the counts table from the log of batches it has folded in, and check that
    every batch holds all of its updates (and no update lacks its batch). With ``pipeline``,
    only that pipeline's batches and counts (with its iterative stages' scopes)."""
    # Every pipeline (NULL), or the pipeline and its scopes ('bank' and 'bank.rings').
    of = "(?::VARCHAR IS NULL OR {c} = ? OR starts_with({c}, ? || '.'))"
    mine = [pipeline, pipeline, pipeline]
    row = s.row(f"SELECT count(*) FROM batches WHERE {of.format(c='pipeline')}", mine)
    assert row is not None
    differences = s.rows(
        f"""
        WITH log AS (
            SELECT pipeline, kind, node, port, t0, t1, sum(delta) AS total
            FROM updates WHERE batch_id <= ? AND {of.format(c="pipeline")}
            GROUP BY ALL HAVING sum(delta) <> 0
        ), mine AS (
            SELECT * FROM counts WHERE {of.format(c="pipeline")}
        )
        SELECT coalesce(l.pipeline, c.pipeline), coalesce(l.kind, c.kind),
               coalesce(l.node, c.node), coalesce(l.port, c.port),
               coalesce(l.t0, c.t0), coalesce(l.t1, c.t1),
               coalesce(l.total, 0), coalesce(c.count, 0)
        FROM log l FULL OUTER JOIN mine c
          ON l.pipeline = c.pipeline AND l.kind = c.kind AND l.node = c.node
         AND l.port = c.port AND l.t0 = c.t0 AND l.t1 = c.t1
        WHERE coalesce(l.total, 0) <> coalesce(c.count, 0)
        ORDER BY 1, 2, 3, 4, 5, 6
        """,
        [s.watermark(), *mine, *mine],
    )
    partial = s.rows(
        f"""
        SELECT b.batch_id, b.n_updates, count(u.batch_id)
        FROM batches b LEFT JOIN updates u USING (batch_id)
        WHERE {of.format(c="b.pipeline")}
        GROUP BY b.batch_id, b.n_updates HAVING count(u.batch_id) <> b.n_updates
        UNION ALL
        SELECT u.batch_id, 0, count(*) FROM updates u ANTI JOIN batches b USING (batch_id)
        WHERE {of.format(c="u.pipeline")}
        GROUP BY u.batch_id
        ORDER BY 1
        """,
        [*mine, *mine],
    )
    return VerifyReport(
        row[0],
        tuple(
            CountDifference(p, location_from_columns(k, n, port), time_from_columns(t0, t1), log, c)
            for p, k, n, port, t0, t1, log, c in differences
        ),
        tuple(PartialBatch(b, e, f) for b, e, f in partial),
    )
