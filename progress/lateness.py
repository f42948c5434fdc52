"""When epochs were released, and how late each input worker is: pure arithmetic over the
moments the ledger recorded.

An input worker **releases** epoch ``e`` when its capability moves past ``e``: an advance from
an epoch at or before ``e`` to one after it, or its close. A stage's input at ``e`` is
**complete** once every worker of every source above it has released ``e`` (shifted by the
delays on the way): the last of those releases. A worker's **lateness** at ``e`` is how long
after the first worker of its source it released ``e``.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class Release:
    """Worker ``worker`` of ``source`` moved its capability from epoch ``start`` to ``end``
    (``None``: it closed) at ``at``: it released every epoch from ``start`` to ``end - 1``."""

    source: str
    worker: int
    start: int
    end: int | None
    at: datetime

    def releases(self, epoch: int) -> bool:
        """Whether this move released ``epoch``.

        >>> from datetime import datetime
        >>> r = Release("cards", 0, 2, 5, datetime(2026, 1, 1))
        >>> [e for e in range(7) if r.releases(e)]
        [2, 3, 4]
        """
        return self.start <= epoch and (self.end is None or epoch < self.end)


@dataclass(frozen=True)
class WorkerLateness:
    """How long after the first worker of its source a worker released each epoch, over the
    last epochs every worker released: the median and the worst, in seconds."""

    source: str
    worker: int
    epochs: int
    median_seconds: float
    worst_seconds: float

    def describe(self) -> str:
        """``card_payments worker 2: 40.0s late (median), 65.2s at worst, over 10 epochs``."""
        return (
            f"{self.source} worker {self.worker}: {self.median_seconds:.1f}s late (median), "
            f"{self.worst_seconds:.1f}s at worst, over {self.epochs} epoch(s)"
        )


def released_at(
    releases: Iterable[Release], source: str, worker: int, epoch: int
) -> datetime | None:
    """When ``worker`` of ``source`` released ``epoch``; None while it holds it."""
    for r in releases:
        if r.source == source and r.worker == worker and r.releases(epoch):
            return r.at
    return None


def complete_at(
    releases: Sequence[Release], workers: Mapping[str, int], epochs: Mapping[str, Iterable[int]]
) -> datetime | None:
    """When the last of the workers of the sources ``workers`` (source: its number of workers)
    released its epochs (``epochs``: per source, the epochs of it a stage's input reads); None
    while one still holds one. A source without workers adds nothing."""
    last: datetime | None = None
    for source, count in workers.items():
        for epoch in epochs[source]:
            for worker in range(count):
                at = released_at(releases, source, worker, epoch)
                if at is None:
                    return None
                last = at if last is None or at > last else last
    return last


def lateness(
    releases: Sequence[Release], source: str, workers: int, *, last: int = 20
) -> list[WorkerLateness]:
    """Each worker's lateness over the last ``last`` epochs every worker of ``source`` has
    released (see the module docs); empty before one has been.

    >>> from datetime import datetime, timedelta
    >>> t0 = datetime(2026, 1, 1)
    >>> moves = [Release("s", 0, e, e + 1, t0 + timedelta(minutes=e)) for e in range(3)]
    >>> late = timedelta(seconds=40)
    >>> moves += [Release("s", 1, e, e + 1, t0 + timedelta(minutes=e) + late) for e in range(3)]
    >>> [(w.worker, w.median_seconds, w.worst_seconds) for w in lateness(moves, "s", 2)]
    [(0, 0.0, 0.0), (1, 40.0, 40.0)]
    """
    mine = [r for r in releases if r.source == source]
    timeline = []  # per epoch every worker released: each worker's release
    for epoch in _released_by_all(mine, workers):
        times = [released_at(mine, source, w, epoch) for w in range(workers)]
        if all(t is not None for t in times):
            timeline.append([t for t in times if t is not None])
    timeline = timeline[-last:]
    if not timeline:
        return []
    late = [[(times[w] - min(times)).total_seconds() for times in timeline] for w in range(workers)]
    return [
        WorkerLateness(source, w, len(timeline), statistics.median(s), max(s))
        for w, s in enumerate(late)
    ]


def _released_by_all(releases: Sequence[Release], workers: int) -> list[int]:
    """The epochs every one of ``workers`` workers has released, in order."""
    ends: dict[int, float] = {}
    for r in releases:
        end = float("inf") if r.end is None else float(r.end)
        ends[r.worker] = max(ends.get(r.worker, 0.0), end)
    if len(ends) < workers:
        return []
    upto = min(ends.values())
    highest = max((r.end or r.start for r in releases), default=0)
    limit = int(min(upto, highest + 1))
    return list(range(limit))
