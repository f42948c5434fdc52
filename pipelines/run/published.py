"""What a sink publishes and where: a committed epoch (``Committed``), and the target of one
sink in its format (``SinkTarget``: Parquet folders in ``pipelines.run.sinks``, a Delta table
in ``pipelines.run.delta_sink``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from pipelines.stages.sink_formats import SinkFormat
from progress import Time


@dataclass(frozen=True)
class Committed:
    """A committed epoch of a sink: its attempt, the ledger batch that committed it, and its
    files (None: an epoch without rows)."""

    epoch: Time
    attempt: str
    batch_id: int
    files: Path | None


@dataclass(frozen=True)
class SinkPlace:
    """One sink of one pipeline and the path it publishes to (its targets' common part)."""

    pipeline: str
    stage: str
    root: Path

    @property
    def location(self) -> str:
        """Where it publishes, in words: its path."""
        return str(self.root)


class SinkTarget(Protocol):
    """Where one sink publishes, in its format."""

    @property
    def stage(self) -> str: ...

    @property
    def root(self) -> Path: ...

    @property
    def format(self) -> SinkFormat: ...

    @property
    def location(self) -> str: ...

    def reader(self) -> str | None:
        """The name the ledger keeps this target's mark under (``progress.ledger.marks``): its
        format and the identity of the place it publishes to, so a sink that publishes
        elsewhere, or to its place made anew, looks at every epoch again; None while nothing
        is published there (no mark is kept then)."""
        ...

    def version(self) -> int | None:
        """The table's version (None: no table yet, or a format without versions)."""
        ...

    def check(self, committed: Committed) -> None:
        """Before the sink's run commits: raise if ``committed`` cannot be published (a table
        whose columns it does not fit)."""
        ...

    def shown(self, committed: Sequence[Committed]) -> list[bool]:
        """For each of ``committed``, whether it is what the sink shows for its epoch already
        (the sink's table read once)."""
        ...

    def publish(self, committed: Committed) -> None:
        """Show ``committed`` for its epoch, whole, replacing what was shown there."""
        ...


@dataclass(frozen=True)
class SinkState:
    """Where a sink stands: its format and location, how many committed epochs it shows, the
    last of them, and its table's version (None for Parquet, or before a table exists)."""

    sink: str
    format: SinkFormat
    location: str
    published: int
    committed: int
    last_published: Time | None
    version: int | None

    def describe(self) -> str:
        """``export (delta) at lake/totals: 3 of 3 committed epochs published, the last 2,
        table version 4``."""
        last = "" if self.last_published is None else f", the last {self.last_published}"
        version = "" if self.version is None else f", table version {self.version}"
        return (
            f"{self.sink} ({self.format.value}) at {self.location}: {self.published} of "
            f"{self.committed} committed epochs published{last}{version}"
        )
