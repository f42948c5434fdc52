"""The upquery sensor and job of a pipeline with partial stages: pending reads filled in Dagster.

A read of a partial stage as of an epoch it has not processed is recorded in the ledger as a
pending upquery (``pipelines.reads.pending``). Each tick, the sensor ``{pipeline}_upqueries`` looks
at every partial stage's pending reads: for a stage that has processed the epoch of some of them, it
requests one run of the job ``{pipeline}_upquery``, tagged ``epochgate/upquery`` with the stage,
under a run key naming exactly those reads (the same reads are requested once). The run looks their
keys up, which fills their holes, and marks them filled; the next lookup of them is a hit. When no
stage can be filled, the skip reason says what holds each epoch read."""

from __future__ import annotations

import hashlib
import time
from typing import Any

import dagster as dg

from dagster_project.annotations import resolved
from dagster_project.metadata import state_metadata
from dagster_project.names import (
    PIPELINE_TAG,
    UPQUERY_TAG,
    upquery_job_name,
    upquery_op_name,
    upquery_sensor_name,
)
from dagster_project.resources import (
    LedgerResource,
    SparkResource,
    StateStoreResource,
    build_runtime,
)
from dagster_project.sensors import DEFAULT_INTERVAL, pipeline_sensor
from pipelines.errors import PipelineError
from pipelines.reads.pending import StageReads, decode_key
from pipelines.stages.pipeline import Pipeline

__all__ = ["UpqueryConfig", "partial_stages", "upquery_job", "upquery_request", "upquery_sensor"]

SHOWN_KEYS = 50
"""Keys a run's metadata lists (the count is always complete)."""


class UpqueryConfig(dg.Config):
    """Which partial stage an upquery run fills the pending reads of."""

    stage: str


def partial_stages(pipeline: Pipeline) -> list[str]:
    """The stages of ``pipeline`` that keep only the keys that are read."""
    return [s.name for s in pipeline.stages.values() if s.partial is not None]


def upquery_request(pipeline: str, reads: StageReads) -> dg.RunRequest:
    """The run that fills the pending reads of a stage that it can answer now; its run key
    names those reads."""
    ids = ",".join(str(r.upquery_id) for r in sorted(reads.ready, key=lambda r: r.upquery_id))
    digest = hashlib.sha256(ids.encode()).hexdigest()[:12]
    return dg.RunRequest(
        run_key=f"{pipeline}:upquery:{reads.stage}:{digest}",
        job_name=upquery_job_name(pipeline),
        run_config={"ops": {upquery_op_name(pipeline): {"config": {"stage": reads.stage}}}},
        tags={PIPELINE_TAG: pipeline, UPQUERY_TAG: reads.stage},
    )


def upquery_job(pipeline: Pipeline) -> dg.JobDefinition:
    """The job whose one op fills a partial stage's pending reads (in process: one JVM)."""
    p = pipeline.name
    name = upquery_job_name(p)

    def fill(
        context: dg.OpExecutionContext,
        config: UpqueryConfig,
        spark: SparkResource,
        ledger: LedgerResource,
        state: StateStoreResource,
    ) -> dg.Output[int]:
        started = time.perf_counter()
        runtime = build_runtime(pipeline, spark=spark, ledger=ledger, state=state)
        try:
            filled = runtime.pending_reads.fill(config.stage)
            info = runtime.state_info(config.stage)
        except PipelineError as err:
            raise dg.Failure(description=str(err), metadata={"stage": config.stage}) from err
        spec = pipeline.stage(config.stage)
        keys = [_shown(spec.key, decode_key(r.key)) for r in filled.reads]
        seconds = time.perf_counter() - started
        context.log.info(
            f"filled {len(filled.reads)} pending read(s) of {config.stage} "
            f"({filled.upqueried} by an upquery) in {seconds:.2f}s"
        )
        metadata: dict[str, Any] = {
            "stage": dg.MetadataValue.text(config.stage),
            "filled": dg.MetadataValue.int(len(filled.reads)),
            "upqueried": dg.MetadataValue.int(filled.upqueried),
            "as_of": dg.MetadataValue.json(sorted({r.as_of for r in filled.reads})),
            "keys": dg.MetadataValue.json(keys[:SHOWN_KEYS]),
            "seconds": dg.MetadataValue.float(round(seconds, 3)),
            **state_metadata(info),
        }
        return dg.Output(len(filled.reads), metadata=metadata)

    op = dg.op(
        name=upquery_op_name(p),
        description=f"Fills the pending reads of a partial stage of {p} (upqueries of its holes).",
        tags={"kind": "spark"},
    )(resolved(fill))

    @dg.job(
        name=name,
        executor_def=dg.in_process_executor,
        description=f"Fills pending reads of a partial stage of {p} once it has processed "
        "their epoch.",
    )
    def upquery() -> None:
        op()

    return upquery


def _shown(key: tuple[str, ...], values: tuple[Any, ...]) -> Any:
    """A key as JSON metadata shows it: a scalar for a one-column key, else a list."""
    return values[0] if len(key) == 1 else list(values)


def upquery_sensor(
    pipeline: Pipeline,
    job: dg.JobDefinition,
    *,
    minimum_interval_seconds: int = DEFAULT_INTERVAL,
    default_status: dg.DefaultSensorStatus = dg.DefaultSensorStatus.RUNNING,
) -> dg.SensorDefinition:
    """The sensor that fills ``pipeline``'s pending reads once their epochs are processed."""
    p = pipeline.name
    stages = partial_stages(pipeline)

    def upqueries(
        context: dg.SensorEvaluationContext,
        spark: SparkResource,
        ledger: LedgerResource,
        state: StateStoreResource,
    ) -> dg.SensorResult:
        if not ledger.exists() or p not in ledger.ledger().pipelines():
            return dg.SensorResult(
                skip_reason=f"No pending upquery in pipeline {p}: nothing was sent to it yet."
            )
        runtime = build_runtime(pipeline, spark=spark, ledger=ledger, state=state)  # no Spark yet
        requests: list[dg.RunRequest] = []
        waiting: list[str] = []
        for stage in stages:
            reads = runtime.pending_reads.status(stage)
            if reads.ready:
                requests.append(upquery_request(p, reads))
            waiting += reads.waiting_lines()
        if requests:
            for line in waiting:
                context.log.info(line)
            return dg.SensorResult(run_requests=requests)
        if not waiting:
            return dg.SensorResult(skip_reason=f"No pending upquery in pipeline {p}.")
        text = "; ".join(waiting)
        return dg.SensorResult(skip_reason=f"No upquery can run in pipeline {p}: {text}.")

    return pipeline_sensor(
        upqueries,
        name=upquery_sensor_name(p),
        job=job,
        description=(
            f"Requests a run that fills the pending reads of a partial stage of {p} once the "
            "stage has processed their epoch; otherwise says what holds each."
        ),
        minimum_interval_seconds=minimum_interval_seconds,
        default_status=default_status,
    )
