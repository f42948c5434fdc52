"""The frontier sensor of a pipeline: each tick, ask the ledger what can run, and request it.

A tick adds a partition for every epoch the pipeline has reached, then requests one run per
epoch with work: the stages the ledger finds ready (every message they will read for the epoch
has arrived) or stale (a revision replaced what they read), and the stages downstream of them
that this run will make ready or stale, upstream first (a run per epoch, not per level of the
graph: each run costs a process and its bookkeeping under the daemon). A run key names the
epoch, the stages and the input messages they read, so a request is made once for the same work
and again when the work changes. Stages already in a queued or running Dagster run are left out.
With the requests come observations of the source partitions they read, whenever their messages
changed (``dagster_project.observations``: a correction shows downstream stale in Dagster).
When nothing can run, the skip reason says who holds each waiting epoch, in plain words.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import dagster as dg

from dagster_project.annotations import resolved
from dagster_project.expectations import check_keys
from dagster_project.in_flight import in_flight_stages
from dagster_project.names import (
    EPOCH_TAG,
    PIPELINE_TAG,
    STAGES_TAG,
    sensor_name,
    stage_key,
)
from dagster_project.observations import new_observations, read_sources
from dagster_project.partitions import epoch_key, epoch_partitions, partitions_name
from dagster_project.resources import LedgerResource
from pipelines.reads.final import Finality
from pipelines.reads.lag import stage_lags
from pipelines.run.kinds import messages_read
from pipelines.run.planning import chain, plan_work
from pipelines.run.revisions import above
from pipelines.stages.clock import Explicit
from pipelines.stages.kinds import SourceStage
from pipelines.stages.pipeline import Pipeline
from progress.ledger import Hold, Ledger, StageStatus
from progress.sentences import source_holds

__all__ = [
    "DEFAULT_INTERVAL",
    "EpochWork",
    "Tick",
    "frontier_sensor",
    "pipeline_sensor",
    "read_tick",
]

DEFAULT_INTERVAL = 30
"""Seconds between ticks: a frontier moves when data is sent or a run commits."""


@dataclass(frozen=True)
class EpochWork:
    """The stages that can run at one epoch, upstream first, and what they will read."""

    pipeline: str
    epoch: int
    stages: tuple[str, ...]
    digest: str
    """A digest of the current input messages of these stages at the epoch."""
    checks: tuple[dg.AssetCheckKey, ...] = ()
    """The checks of these stages' assets (``dagster_project.expectations.check_keys``)."""

    @property
    def run_key(self) -> str:
        stages = "+".join(self.stages)
        return f"{self.pipeline}:{epoch_key(self.epoch)}:{stages}:{self.digest}"

    def run_request(self) -> dg.RunRequest:
        return dg.RunRequest(
            run_key=self.run_key,
            partition_key=epoch_key(self.epoch),
            asset_selection=[stage_key(self.pipeline, s) for s in self.stages],
            asset_check_keys=list(self.checks),
            tags={
                PIPELINE_TAG: self.pipeline,
                EPOCH_TAG: str(self.epoch),
                STAGES_TAG: ",".join(self.stages),
            },
        )


@dataclass(frozen=True)
class Tick:
    """What one look at the ledger finds for a pipeline."""

    pipeline: str
    work: tuple[EpochWork, ...]
    epochs: tuple[int, ...]
    """Every epoch some stage has reached (pending or done): each needs a partition."""
    held: tuple[tuple[int, tuple[str, ...]], ...]
    """Per epoch that waits, who holds it, in plain words (sources first)."""
    in_flight: Mapping[int, tuple[str, ...]] = field(default_factory=dict)
    """Stages left out because a queued or running Dagster run has them, per epoch."""
    inputs: tuple[str, ...] = ()
    """The input workers that hold the earliest open epoch, in plain words (none once every
    input is closed)."""
    behind: tuple[str, ...] = ()
    """The stages behind their freshness (``Pipeline.freshness``), in plain words."""

    def waiting_lines(self) -> list[str]:
        return [f"epoch {epoch} waits: {'; '.join(holds)}" for epoch, holds in self.held]

    def skip_reason(self) -> str:
        """Why nothing was requested: what runs, what holds each waiting epoch, and (when no
        stage waits) which input workers hold the next epoch."""
        parts = [
            f"epoch {epoch} is running ({', '.join(stages)})"
            for epoch, stages in sorted(self.in_flight.items())
        ]
        parts += self.waiting_lines()
        parts += self.behind
        if not self.held:
            if not self.in_flight:
                parts.append("nothing waits: every message sent so far has been processed")
            parts.append("; ".join(self.inputs) if self.inputs else "every input is closed")
        return " ".join(
            _sentence(part) for part in [f"nothing to run in pipeline {self.pipeline}", *parts]
        )


def read_tick(
    ledger: Ledger, pipeline: Pipeline, in_flight: Mapping[int, set[str]] | None = None
) -> Tick:
    """Read the ledger's status of ``pipeline`` and the work it allows, leaving out the stages
    of ``in_flight`` (per epoch, stages a Dagster run already has)."""
    p = pipeline.name
    in_flight = in_flight or {}
    with ledger.session():
        tracker = ledger.tracker(p)
        statuses = ledger.status(p, tracker=tracker)
        carries = {name for name, s in pipeline.stages.items() if s.holds_state}
        known = [s for s in statuses if s.stage in pipeline.stages]
        planned = plan_work(known, in_flight, carries)
        work = chain(tracker, known, planned, in_flight, carries)
        # What the stages planned from the status read: a stage chained after them reads what
        # the run itself writes.
        digests = {
            epoch: _digest(ledger, pipeline, epoch, stages) for epoch, stages in planned.items()
        }
    epochs: set[int] = set()
    held: dict[int, list[str]] = {}
    for s in statuses:
        if s.is_input:
            continue
        for t in (*s.done, *s.ready, *s.running, *s.waiting, *s.stale):
            if isinstance(t, int):
                epochs.add(t)
        for f in s.failed:  # a failed run that is not tried again holds its epoch
            if isinstance(f.time, int) and s.stage not in work.get(f.time, ()):
                texts = held.setdefault(f.time, [])
                if f.text not in texts:
                    texts.append(f.text)
        first = s.waiting[0] if s.waiting else None
        if isinstance(first, int) and s.stage not in work.get(first, ()):  # not run this tick
            texts = held.setdefault(first, [])
            for hold in s.holds:
                text = hold.text + close_hint(pipeline, hold)
                if text not in texts:
                    texts.append(text)
    return Tick(
        p,
        tuple(
            EpochWork(p, t, stages, digests[t], _checks(pipeline, stages))
            for t, stages in sorted(work.items())
        ),
        tuple(sorted(epochs)),
        tuple((t, tuple(sorted(texts, key=_sources_first))) for t, texts in sorted(held.items())),
        {t: tuple(sorted(s)) for t, s in in_flight.items() if s},
        _open_inputs(statuses),
        _behind(ledger, pipeline),
    )


def _behind(ledger: Ledger, pipeline: Pipeline) -> tuple[str, ...]:
    """The stages whose oldest open epoch has been open longer than their freshness."""
    if not pipeline.fresh_within:
        return ()
    stages = pipeline.stages
    above_each = {name: above(stages, name) for name in stages}
    finality = Finality(stages, above_each, ledger, pipeline.name)
    lags = stage_lags(stages, finality, ledger, pipeline.fresh_within)
    return tuple(text for lag in lags if (text := lag.behind_sentence()) is not None)


def _checks(pipeline: Pipeline, stages: Sequence[str]) -> tuple[dg.AssetCheckKey, ...]:
    return tuple(key for stage in stages for key in check_keys(pipeline, stage))


def close_hint(pipeline: Pipeline, hold: Hold) -> str:
    """What will close the epoch a source worker holds, when its source closes by time or by
    done-marker: `` (until 2026-11-21T08:10:00+00:00)``; else nothing (its worker does)."""
    source, epoch = hold.blocker.location.node, hold.blocker.time
    if source not in pipeline.stages or not isinstance(epoch, int) or len(hold.workers) != 1:
        return ""
    stage = pipeline.stage(source)
    if not isinstance(stage, SourceStage) or isinstance(stage.close, Explicit):
        return ""
    return f" ({stage.close.until(pipeline.clock, epoch, hold.workers[0])})"


def _sentence(text: str) -> str:
    return f"{text[:1].upper()}{text[1:]}."


def _sources_first(text: str) -> bool:
    return not text.startswith("source ")


def _digest(ledger: Ledger, pipeline: Pipeline, epoch: int, stages: Sequence[str]) -> str:
    """A short digest of the input messages the stages read at ``epoch``: it changes when a
    revision replaces one, so the same stages can be requested again for the new input."""
    read = sorted(
        (stage, upstream, m.attempt)
        for stage in stages
        for upstream in pipeline.stage(stage).inputs
        for m in messages_read(pipeline, ledger, upstream, epoch)
    )
    return hashlib.sha256(json.dumps(read).encode()).hexdigest()[:12]


def _open_inputs(statuses: Sequence[StageStatus]) -> tuple[str, ...]:
    """The input workers at the earliest epoch any input still holds, one line per source."""
    held = [
        (t, s.stage, w) for s in statuses if s.is_input for w, t in s.workers if isinstance(t, int)
    ]
    if not held:
        return ()
    first = min(t for t, _, _ in held)
    workers: dict[str, list[int]] = {}
    for t, source, w in held:
        if t == first:
            workers.setdefault(source, []).append(w)
    return tuple(source_holds(source, ws, first) for source, ws in workers.items())


def frontier_sensor(
    pipeline: Pipeline,
    job: dg.UnresolvedAssetJobDefinition,
    *,
    minimum_interval_seconds: int = DEFAULT_INTERVAL,
    default_status: dg.DefaultSensorStatus = dg.DefaultSensorStatus.RUNNING,
) -> dg.SensorDefinition:
    """The sensor that runs ``pipeline``'s stages as their epochs become ready."""
    p = pipeline.name
    partitions = epoch_partitions(p)

    def frontier(context: dg.SensorEvaluationContext, ledger: LedgerResource) -> dg.SensorResult:
        if not ledger.exists():
            return dg.SensorResult(
                skip_reason=f"No ledger at {ledger.ledger_path} yet: nothing was sent to {p}."
            )
        book = ledger.ledger()
        running = in_flight_stages(context.instance, pipeline)
        with book.session():  # one hold on the ledger for the whole look
            if p not in book.pipelines():
                return dg.SensorResult(
                    skip_reason=f"Pipeline {p} is not in the ledger at {book.path} yet: "
                    "nothing was sent to it."
                )
            tick = read_tick(book, pipeline, running)
            sources = read_sources(book, pipeline, [(w.epoch, w.stages) for w in tick.work])
        known = set(context.instance.get_dynamic_partitions(partitions_name(p)))
        new = [k for k in map(epoch_key, tick.epochs) if k not in known]
        adds = [partitions.build_add_request(new)] if new else []
        if not tick.work:
            return dg.SensorResult(skip_reason=tick.skip_reason(), dynamic_partitions_requests=adds)
        for line in tick.waiting_lines():
            context.log.info(line)
        for line in tick.behind:
            context.log.warning(line)
        requests = [w.run_request() for w in tick.work]
        return dg.SensorResult(
            run_requests=requests,
            dynamic_partitions_requests=adds,
            asset_events=new_observations(context.instance, sources),
        )

    return pipeline_sensor(
        frontier,
        name=sensor_name(p),
        job=job,
        description=(
            f"Requests a run for each epoch of {p} with ready or stale stages (from the ledger's "
            "frontiers); when nothing can run, says who holds each waiting epoch."
        ),
        minimum_interval_seconds=minimum_interval_seconds,
        default_status=default_status,
    )


def pipeline_sensor(
    evaluate: Callable[..., dg.SensorResult],
    *,
    name: str,
    job: dg.JobDefinition | dg.UnresolvedAssetJobDefinition | None,
    description: str,
    minimum_interval_seconds: int,
    default_status: dg.DefaultSensorStatus,
) -> dg.SensorDefinition:
    """A sensor of a pipeline that calls ``evaluate`` each tick, with the resources its
    parameters name (``job`` None: a sensor that requests no run)."""
    return dg.sensor(
        name=name,
        job=job,
        minimum_interval_seconds=minimum_interval_seconds,
        default_status=default_status,
        description=description,
    )(resolved(evaluate))
