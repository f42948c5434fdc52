"""Fault points: named places in the run path where a process can be made to die by SIGKILL.

``EPOCHGATE_FAULT=POINT[:N]`` arms one point for the process (and its children, which inherit
the environment): the N-th time (default 1) the process reaches it, it writes one line to
stderr (``epochgate fault: killed at POINT (reached N times)``) and sends itself SIGKILL. A
local Spark JVM dies with it (it exits when its driver's pipe closes); a Spark Connect server is
another process and lives on, as it would after a real crash of its client. The variable is read
once, when a point is first reached (importing reads no environment); unset, ``reach`` is then
one cached call and one comparison.

The points live here, under every package that names one (the ledger, the state store, the
run path, the Dagster assets): ``progress`` has no I/O beyond this signal to itself.

>>> parse("ledger-transaction:3")
Armed(point=<FaultPoint.LEDGER_TRANSACTION: 'ledger-transaction'>, count=3)
>>> parse("") is None
True
"""

from __future__ import annotations

import functools
import os
import signal
import sys
from dataclasses import dataclass
from enum import StrEnum

from progress.errors import FaultSpecError

FAULT_ENV = "EPOCHGATE_FAULT"


class FaultPoint(StrEnum):
    """Where a run can be killed: each value is the name ``EPOCHGATE_FAULT`` takes."""

    ATTEMPT_WRITTEN = "attempt-written"
    """A stage run's attempt is written; its commit has not started."""
    LEDGER_TRANSACTION = "ledger-transaction"
    """Inside a ledger transaction: every write is made, ``COMMIT`` is not."""
    BEFORE_PUBLISH = "before-publish"
    """A stage run is committed; what follows a commit (a sink's publish, a stateful stage's
    state, its key budget) has not happened."""
    TABLE_WRITTEN = "table-written"
    """A sink's epoch has its files in its table's folder (the attempt's, taken as they are);
    the table commit has not started."""
    TABLE_COMMITTED = "table-committed"
    """A sink's epoch is committed to its table (a Delta commit, an Iceberg snapshot); the run
    has not returned."""
    BEFORE_MATERIALIZATION = "before-materialization"
    """A stage run under Dagster is committed; Dagster has not recorded its materialization."""
    UPQUERY_FILL = "upquery-fill"
    """An upquery has re-derived a partial stage's rows for its keys; the state store has not
    filled them (each stage of a chain of partial stages reaches it once)."""
    CAPTURE_APPEND = "capture-append"
    """Half of the lines a capture appends to its log are written (a torn line)."""
    REPLAY_STEP = "replay-step"
    """A group of a captured stream's events has its data linked; the ledger has not fed it."""
    EVICTION = "eviction"
    """Inside an eviction's state-store transaction: keys are gone from the first stage, not
    from those below it, nothing is committed."""


@dataclass(frozen=True)
class Armed:
    """The armed point and on which reach (1 = the first) it kills."""

    point: FaultPoint
    count: int = 1


def parse(value: str | None) -> Armed | None:
    """``POINT[:N]`` as an ``Armed`` (None when empty); raise ``FaultSpecError`` otherwise."""
    if not value:
        return None
    name, _, count = value.partition(":")
    try:
        point = FaultPoint(name)
    except ValueError:
        known = ", ".join(p.value for p in FaultPoint)
        raise FaultSpecError(value, f"{name!r} is not a fault point (known: {known})") from None
    if not count:
        return Armed(point)
    if not count.isdigit() or int(count) < 1:
        raise FaultSpecError(value, f"the count {count!r} is not a whole number >= 1")
    return Armed(point, int(count))


@functools.cache
def armed() -> Armed | None:
    """The point this process dies at, read once from ``$EPOCHGATE_FAULT`` (None: no fault
    point is armed)."""
    return parse(os.environ.get(FAULT_ENV))


_reached: dict[FaultPoint, int] = {}


def armed_at(point: FaultPoint) -> bool:
    """Whether ``point`` is the armed one (a caller may then take a slower, tearable path)."""
    found = armed()
    return found is not None and found.point is point


def reach(point: FaultPoint) -> None:
    """Mark that this process reached ``point``: SIGKILL itself if that is the armed reach."""
    found = armed()
    if found is None or found.point is not point:
        return
    _reached[point] = n = _reached.get(point, 0) + 1
    if n == found.count:
        sys.stderr.write(f"epochgate fault: killed at {point.value} (reached {n} times)\n")
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGKILL)
