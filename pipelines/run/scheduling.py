"""Applying a pipeline's close rules to the ledger: the clock's side of scheduled epochs.

``close_epochs(ledger, pipeline, now)`` looks at every worker of every source whose epochs
close by time or by done-marker, advances each worker past the epochs its rule closes (sealing
those it sent nothing for, so they run empty), and says what it did and what each worker still
waits for. It needs no Spark: the Dagster epoch clock sensor and ``epochgate clock`` call it.

Every worker is read and advanced in one ledger session, so a worker that advances itself at
the same moment is never moved back.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from pipelines.errors import ClockError
from pipelines.stages.clock import AfterEpochEnd, DoneMarkers, EpochClock
from pipelines.stages.kinds import SourceStage
from pipelines.stages.pipeline import Pipeline
from progress.ledger import Ledger


@dataclass(frozen=True)
class Closing:
    """A worker advanced past ``start .. end - 1`` by its source's close rule."""

    source: str
    worker: int
    start: int
    end: int
    why: str

    def describe(self) -> str:
        epochs = (
            f"epoch {self.start}"
            if self.end == self.start + 1
            else (f"epochs {self.start}-{self.end - 1}")
        )
        return f"source {self.source}, worker {self.worker}: closed {epochs} ({self.why})"


@dataclass(frozen=True)
class Waiting:
    """A worker whose current epoch its rule has not closed yet, and what will close it."""

    source: str
    worker: int
    epoch: int
    until: str

    def describe(self) -> str:
        return f"source {self.source}, worker {self.worker} holds epoch {self.epoch} {self.until}"


@dataclass(frozen=True)
class ClockTick:
    """What one application of the close rules found and did."""

    pipeline: str
    now: datetime
    opened: int | None
    """Epochs the clock has opened by ``now`` (``None`` without a clock)."""
    closed: tuple[Closing, ...]
    waiting: tuple[Waiting, ...]

    def lines(self) -> list[str]:
        out = []
        if self.opened is not None:
            latest = f"up to epoch {self.opened - 1}" if self.opened else "none yet"
            out.append(f"{self.pipeline}: epochs opened by {self.now.isoformat()}: {latest}")
        out += [c.describe() for c in self.closed]
        out += [w.describe() for w in self.waiting]
        return out


def close_epochs(ledger: Ledger, pipeline: Pipeline, now: datetime) -> ClockTick:
    """Advance every worker whose close rule (time-based or marker-based) closes its epochs by
    ``now``; workers of sources closed explicitly are left alone."""
    clock = pipeline.clock
    p = pipeline.name
    pipeline.register(ledger)
    closed: list[Closing] = []
    waiting: list[Waiting] = []
    with ledger.session():  # read and advance every worker with nobody else in between
        for stage in pipeline.stages.values():
            if not isinstance(stage, SourceStage):
                continue
            rule = stage.close
            if not isinstance(rule, AfterEpochEnd | DoneMarkers):
                continue
            for worker in range(stage.workers):
                at = ledger.worker_time(p, stage.name, worker)
                if at is None:
                    continue  # closed for good
                if not isinstance(at, int):
                    raise ClockError(f"source {stage.name!r} worker {worker} is at {at!r}")
                end, why, until = _reach(rule, clock, at, now, worker=worker)
                if end > at:
                    ledger.advance(p, stage.name, worker, end, seal=True)
                    closed.append(Closing(stage.name, worker, at, end, why))
                waiting.append(Waiting(stage.name, worker, end, until))
    opened = clock.opened(now) if clock is not None else None
    return ClockTick(p, now, opened, tuple(closed), tuple(waiting))


def _reach(
    rule: AfterEpochEnd | DoneMarkers,
    clock: EpochClock | None,
    at: int,
    now: datetime,
    *,
    worker: int,
) -> tuple[int, str, str]:
    """The epoch the rule lets ``worker`` advance to from ``at``, why, and what it waits for
    there."""
    end = at
    if isinstance(rule, AfterEpochEnd):
        assert clock is not None  # a time-based source needs a clock to be defined
        while rule.closes_at(clock, end) <= now:
            end += 1
        last = rule.closes_at(clock, end - 1).isoformat() if end > at else ""
        why = f"ended, grace {rule.grace} over at {last}"
    else:
        while rule.marker(end, worker).exists():
            end += 1
        why = "done-marker delivered"
    return end, why, rule.until(clock, end, worker)
