"""Scheduled epochs: an epoch clock that opens epochs, and the rules that close them per source.

An ``EpochClock`` numbers epochs by a cron expression: epoch 0 opens at ``origin`` (a time the
expression matches), epoch ``n`` at the ``n``-th match after it, and each epoch covers
``length`` from its opening (``[opens, ends)``). Records belong to the epoch whose window holds
them (``epoch_of``), as the worker that sends them decides.

Each source says how its epochs close, that is, when its workers promise that no more data
will come for an epoch (the worker's input advances past it):

- ``Explicit()``: the workers say so themselves (``advance_to``/``close``, ``epochgate
  advance``/``close``). The default.
- ``AfterEpochEnd(grace)``: time-based. Once an epoch has ended and ``grace`` has passed,
  every worker still at it is advanced past it; data sent later for it is refused.
- ``DoneMarkers(directory)``: marker-based. Each worker delivers a done-marker per epoch, the
  file ``directory/epoch=<n>/worker=<w>.done``; a worker is advanced past each epoch it has
  marked, so an epoch closes once every worker has delivered its marker.

Epochs passed this way with nothing sent by a worker are sealed as empty, so every stage runs
them. ``close_epochs`` (in ``pipelines.run.scheduling``) applies the rules to the ledger.

>>> from datetime import datetime, timedelta, timezone
>>> clock = EpochClock("0 * * * *", timedelta(hours=1), datetime(2026, 11, 2, tzinfo=timezone.utc))
>>> clock.opens(3).isoformat()
'2026-11-02T03:00:00+00:00'
>>> clock.opened(datetime(2026, 11, 2, 3, 0, tzinfo=timezone.utc))
4
>>> clock.epoch_of(datetime(2026, 11, 2, 2, 30, tzinfo=timezone.utc))
2
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from cronsim import CronSim, CronSimError

from pipelines.errors import ClockError

MAX_EPOCHS = 10**12
"""Epochs a clock can number (the width of a partition key)."""


@dataclass(frozen=True)
class EpochClock:
    """Epochs that open on a cron schedule and last ``length`` each (see the module docs)."""

    cron: str
    length: timedelta
    origin: datetime
    """When epoch 0 opens: time-zone aware, and a time ``cron`` matches."""
    _opens: list[datetime] = field(default_factory=list, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.origin.tzinfo is None or self.origin.utcoffset() is None:
            raise ClockError(
                f"epoch clock origin {self.origin.isoformat()} has no time zone: give one "
                "(e.g. datetime(..., tzinfo=timezone.utc))"
            )
        if self.length <= timedelta(0):
            raise ClockError(f"epoch clock length must be positive, got {self.length}")
        try:
            first = next(CronSim(self.cron, self.origin - timedelta(seconds=1)))
        except (CronSimError, StopIteration) as err:
            raise ClockError(f"epoch clock cron {self.cron!r} is not usable: {err}") from err
        if first != self.origin.replace(microsecond=0) or self.origin.microsecond:
            raise ClockError(
                f"epoch clock origin {self.origin.isoformat()} is not a time cron "
                f"{self.cron!r} matches (the next one is {first.isoformat()})"
            )
        self._opens.append(self.origin)

    def opens(self, epoch: int) -> datetime:
        """When ``epoch`` opens."""
        if type(epoch) is not int or not 0 <= epoch < MAX_EPOCHS:
            raise ClockError(f"epoch {epoch!r} is not an epoch of a clock (ints from 0)")
        if epoch >= len(self._opens):
            ticks = CronSim(self.cron, self._opens[-1])
            while len(self._opens) <= epoch:
                self._opens.append(next(ticks))
        return self._opens[epoch]

    def ends(self, epoch: int) -> datetime:
        """When ``epoch``'s window ends (its opening plus the clock's length)."""
        return self.opens(epoch) + self.length

    def opened(self, now: datetime) -> int:
        """How many epochs have opened by ``now``: epochs ``0 .. opened(now) - 1``."""
        self._aware(now)
        if now < self.origin:
            return 0
        # Find an epoch that opens after now by doubling, then the first one by bisection.
        high = 1
        while self.opens(high) <= now:
            high *= 2
        low = high // 2
        while low < high:
            middle = (low + high) // 2
            if self.opens(middle) <= now:
                low = middle + 1
            else:
                high = middle
        return low

    def epoch_of(self, moment: datetime) -> int | None:
        """The epoch whose window holds ``moment`` (the latest to open, if windows overlap),
        or ``None`` when it falls between windows or before the origin."""
        latest = self.opened(moment) - 1
        if latest < 0 or moment >= self.ends(latest):
            return None
        return latest

    @staticmethod
    def _aware(now: datetime) -> None:
        if now.tzinfo is None or now.utcoffset() is None:
            raise ClockError(f"time {now.isoformat()} has no time zone")


@dataclass(frozen=True)
class Explicit:
    """The source's workers close their epochs themselves (advance and close)."""


@dataclass(frozen=True)
class AfterEpochEnd:
    """An epoch closes for every worker once it has ended and ``grace`` has passed."""

    grace: timedelta = timedelta(0)

    def __post_init__(self) -> None:
        if self.grace < timedelta(0):
            raise ClockError(f"a grace period cannot be negative, got {self.grace}")

    def closes_at(self, clock: EpochClock, epoch: int) -> datetime:
        return clock.ends(epoch) + self.grace

    def until(self, clock: EpochClock | None, epoch: int, worker: int) -> str:
        """What closes ``epoch`` for ``worker``, in words."""
        if clock is None:
            raise ClockError("closing after each epoch ends needs an epoch clock")
        return f"until {self.closes_at(clock, epoch).isoformat()}"


@dataclass(frozen=True)
class DoneMarkers:
    """A worker's epoch closes when it delivers its done-marker file for it."""

    directory: str

    def marker(self, epoch: int, worker: int) -> Path:
        """The file worker ``worker`` writes when it has sent everything for ``epoch``."""
        return Path(self.directory).expanduser() / f"epoch={epoch}" / f"worker={worker}.done"

    def until(self, clock: EpochClock | None, epoch: int, worker: int) -> str:
        return f"until its done-marker {self.marker(epoch, worker)}"


CloseRule = Explicit | AfterEpochEnd | DoneMarkers
"""How a source's epochs close."""

EXPLICIT = Explicit()
