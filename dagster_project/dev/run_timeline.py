"""Where a Dagster run's seconds go, read from its event log.

    for part in run_timeline(instance, run_id).parts:
        print(f"{part.label}: {part.seconds:.2f}s")

The marks, in the order a run passes them (a mark the run has no event for is skipped, its time
counted in the part after it): queued (``RUN_ENQUEUED``), launched (``RUN_STARTING``: the
daemon's run queue took it and handed it to the run launcher), in its process (the engine
event ``Started process for run``: the process has started and imported Dagster), started
(``RUN_START``: the job is loaded and its plan made), first step started, first stage
materialized (resources, the Spark session and the first stage), last step ended (the later
stages), ended (``RUN_SUCCESS``, ``RUN_FAILURE`` or ``RUN_CANCELED``).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import dagster as dg

EVENT = dg.DagsterEventType
IN_PROCESS = "Started process for run"
"""The start of the engine event ``dagster api execute_run`` reports once its process is up."""
ENDS = (EVENT.RUN_SUCCESS, EVENT.RUN_FAILURE, EVENT.RUN_CANCELED)
STEP_ENDS = (EVENT.STEP_SUCCESS, EVENT.STEP_FAILURE)

Entry = dg.EventLogEntry


def of_type(*types: dg.DagsterEventType) -> Callable[[Entry], bool]:
    return lambda e: e.dagster_event is not None and e.dagster_event.event_type in types


def in_process(entry: Entry) -> bool:
    return of_type(EVENT.ENGINE_EVENT)(entry) and entry.message.startswith(IN_PROCESS)


@dataclass(frozen=True)
class Mark:
    """A moment of a run: the first (or, ``last``, the last) event that ``matches``; the part
    of the run that ends there is ``label``."""

    label: str
    matches: Callable[[Entry], bool]
    last: bool = False


MARKS = (
    Mark("queued", of_type(EVENT.RUN_ENQUEUED)),
    Mark("in the run queue until launched", of_type(EVENT.RUN_STARTING)),
    Mark("until its process has it (start, imports)", in_process),
    Mark("loading the job, planning", of_type(EVENT.RUN_START)),
    Mark("to the first step", of_type(EVENT.STEP_START)),
    Mark("resources, Spark session, first stage", of_type(EVENT.ASSET_MATERIALIZATION)),
    Mark("the later stages", of_type(*STEP_ENDS), last=True),
    Mark("finishing the run", of_type(*ENDS)),
)


@dataclass(frozen=True)
class Part:
    label: str
    seconds: float


@dataclass(frozen=True)
class Timeline:
    """A run's parts in order, from its first mark (``start``, a Unix time) to its last."""

    run_id: str
    start: float
    end: float
    parts: tuple[Part, ...]

    @property
    def seconds(self) -> float:
        return self.end - self.start


def timeline(run_id: str, entries: Sequence[Entry]) -> Timeline:
    """The parts of a run from its event log ``entries`` (see the module docs)."""
    found: list[tuple[str, float]] = []
    for mark in MARKS:
        times = [e.timestamp for e in entries if mark.matches(e)]
        if times:
            found.append((mark.label, max(times) if mark.last else min(times)))
    if not found:
        raise ValueError(f"run {run_id} has no event of a run's progress")
    parts = tuple(
        Part(label, max(0.0, at - before)) for (_, before), (label, at) in itertools.pairwise(found)
    )
    return Timeline(run_id, found[0][1], found[-1][1], parts)


def run_timeline(instance: dg.DagsterInstance, run_id: str) -> Timeline:
    """The parts of run ``run_id`` of ``instance``."""
    return timeline(run_id, instance.all_logs(run_id))
