"""The moments the ledger recorded, for lag and lateness (``progress.lateness``): each input
worker's releases, the first message of each source at each epoch, and when the current output
of each stage at each epoch was committed; read in one session, with the ledger's clock."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

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


_RELEASES = """
    SELECT b.node, b.worker, min(u.t0) FILTER (WHERE u.delta < 0) AS start,
           max(u.t0) FILTER (WHERE u.delta > 0) AS stop, b.committed_at
    FROM batches b JOIN updates u USING (batch_id)
    WHERE b.pipeline = ? AND b.origin = 'input' AND u.kind = 0 AND u.node = b.node {nodes}
    GROUP BY b.batch_id, b.node, b.worker, b.committed_at
    HAVING start IS NOT NULL {epochs}
    ORDER BY b.batch_id
"""
"""Each input worker's moves of its capability: the epoch it left, the one it moved to (NULL
when it closed) and when."""

_COMMITS = """
    SELECT m.stage, m.t0, max(b.committed_at) FROM messages m
    JOIN batches b ON b.pipeline = m.pipeline AND b.batch_id = m.batch_id
    WHERE m.pipeline = ? AND m.current AND m.port = 0 {stage}
    GROUP BY ALL
"""


def read(s: Session, pipeline: str) -> Timeline:
    """The timeline of ``pipeline``'s epochs (the outer epoch of a stage with a scope)."""
    moves = s.rows(_RELEASES.format(nodes="", epochs=""), [pipeline])
    arrivals = s.rows(
        "SELECT b.node, b.t0, min(b.committed_at) FROM batches b "
        "WHERE b.pipeline = ? AND b.origin = 'send' AND b.t0 IS NOT NULL GROUP BY ALL",
        [pipeline],
    )
    commits = s.rows(_COMMITS.format(stage=""), [pipeline])
    return _timeline(s, moves, arrivals, commits)


def read_epoch(
    s: Session, pipeline: str, stage: str, epoch: int, reads: Mapping[str, Collection[int]]
) -> Timeline:
    """The part of the timeline about ``stage`` at ``epoch``: the releases of the epochs its
    input reads (``reads``: per source, those epochs) and the commit of its output there; no
    arrivals. What ``read`` reads of the whole pipeline, for one materialization."""
    wanted = [(source, e) for source, epochs in reads.items() for e in epochs]
    moves: list[tuple[Any, ...]] = []
    if wanted:
        sources = sorted({source for source, _ in wanted})
        low, high = min(e for _, e in wanted), max(e for _, e in wanted)
        marks = ", ".join("?" * len(sources))
        sql = _RELEASES.format(
            nodes=f"AND b.node IN ({marks})", epochs="AND start <= ? AND (stop IS NULL OR stop > ?)"
        )
        moves = s.rows(sql, [pipeline, *sources, high, low])
    commits = s.rows(
        _COMMITS.format(stage="AND m.stage = ? AND m.t0 = ?"), [pipeline, stage, epoch]
    )
    return _timeline(s, moves, [], commits)


def _timeline(
    s: Session,
    moves: Sequence[tuple[Any, ...]],
    arrivals: Sequence[tuple[Any, ...]],
    commits: Sequence[tuple[Any, ...]],
) -> Timeline:
    now = s.row("SELECT now()::TIMESTAMP", [])
    assert now is not None
    return Timeline(
        tuple(Release(node, worker, start, end, at) for node, worker, start, end, at in moves),
        {(node, t0): at for node, t0, at in arrivals},
        {(stage, t0): at for stage, t0, at in commits},
        now[0],
    )
