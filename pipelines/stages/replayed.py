"""Replayed sources: a source fed by captured streams instead of by ``send``.

A replayed source reads one or many capture directories (``pipelines.capture.log``). Stream
``i`` (the ``i``-th directory) goes to worker ``i % workers``, as timely's replay spreads its
streams; a worker with no stream closes at once, and a worker's capability is the least
frontier of its streams, so the source's frontier passes an epoch only after every stream has
released it. Its columns are those the captures' headers record; they must all agree.
``Runtime.replay()`` feeds the events (``pipelines.capture.replay``); its spec is made from
the captures' headers by ``pipelines.capture.sources``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from pipelines.stages.kinds import Feed, SourceStage


@dataclass(frozen=True, kw_only=True)
class ReplayStage(SourceStage):
    """A source whose workers replay captured streams: ``directories[i]`` holds stream
    ``streams[i]`` (its id, from the capture's header) and goes to worker ``i % workers``."""

    directories: tuple[str, ...]
    streams: tuple[str, ...]

    kind: ClassVar[str] = "replayed source"
    fed_by: ClassVar[Feed] = Feed.REPLAY

    def worker_of(self, index: int) -> int:
        """The worker that replays stream ``index``."""
        return index % self.workers

    def streams_of(self, worker: int) -> tuple[int, ...]:
        """The streams (by index) that worker ``worker`` replays; none: it closes at once."""
        return tuple(i for i in range(len(self.directories)) if self.worker_of(i) == worker)

    def describe(self) -> str:
        return (
            f"Replayed source: {len(self.directories)} captured stream(s) on "
            f"{self.workers} worker(s); data arrives through `epochgate replay`, not through "
            "Dagster"
        )
