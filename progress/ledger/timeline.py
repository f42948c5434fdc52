"""The moments the ledger recorded, for lag and lateness (``progress.lateness``): each input
worker's releases, the first message of each source at each epoch, and when the current output
of each stage at each epoch was committed; read in one session, with the ledger's clock."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from progress.lateness import Release
from progress.ledger.sessions import Session


@dataclass(frozen=True)
class Timeline:
    """One pipeline's recorded moments (naive datetimes of the ledger's clock)."""

    releases: tuple[Release, ...]
    arrivals: dict[tuple[str, int], datetime]
    """Per ``(source, epoch)``: when its first message with data there was committed."""
    commits: dict[tuple[str, int], datetime]
    """Per ``(stage, epoch)``: when its current output message there was committed."""
    now: datetime


def read(s: Session, pipeline: str) -> Timeline:
    """The timeline of ``pipeline``'s epochs (the outer epoch of a stage with a scope)."""
    moves = s.rows(
        """
        SELECT b.node, b.worker, min(u.t0) FILTER (WHERE u.delta < 0),
               max(u.t0) FILTER (WHERE u.delta > 0), b.committed_at
        FROM batches b JOIN updates u USING (batch_id)
        WHERE b.pipeline = ? AND b.origin = 'input' AND u.kind = 0 AND u.node = b.node
        GROUP BY b.batch_id, b.node, b.worker, b.committed_at
        HAVING min(u.t0) FILTER (WHERE u.delta < 0) IS NOT NULL
        ORDER BY b.batch_id
        """,
        [pipeline],
    )
    arrivals = s.rows(
        "SELECT b.node, b.t0, min(b.committed_at) FROM batches b "
        "WHERE b.pipeline = ? AND b.origin = 'send' AND b.t0 IS NOT NULL GROUP BY ALL",
        [pipeline],
    )
    commits = s.rows(
        "SELECT m.stage, m.t0, max(b.committed_at) FROM messages m "
        "JOIN batches b ON b.pipeline = m.pipeline AND b.batch_id = m.batch_id "
        "WHERE m.pipeline = ? AND m.current AND m.port = 0 GROUP BY ALL",
        [pipeline],
    )
    now = s.row("SELECT now()::TIMESTAMP", [])
    assert now is not None
    return Timeline(
        tuple(Release(node, worker, start, end, at) for node, worker, start, end, at in moves),
        {(node, t0): at for node, t0, at in arrivals},
        {(stage, t0): at for stage, t0, at in commits},
        now[0],
    )
