"""The factory that turns pipelines into Dagster ``Definitions``, and the ``defs`` Dagster loads.

Per pipeline: its epochs as dynamic partitions, one asset per stage (sources as external assets)
with the pipeline's edges as dependencies, a ledger check per stage, a job that runs the stages
in one process (a process per step would start a JVM per step), a frontier sensor, for a
pipeline with scheduled epochs (a clock, or sources closed by time or done-marker) an epoch clock
sensor, and for a pipeline with partial stages an upquery job and sensor that fill reads
recorded as pending (``dagster_project.upqueries``; it ticks as often as the frontier sensor),
and for a pipeline with replayed sources a replay sensor that feeds their captured events
(``dagster_project.replays``; as often too).

    defs = build_definitions([bank.pipeline()], ledger=LedgerResource(path="/srv/ledger.duckdb"))
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import dagster as dg

from dagster_project.assets import source_specs, stage_asset_keys, stage_assets
from dagster_project.epoch_clock import DEFAULT_INTERVAL as CLOCK_INTERVAL
from dagster_project.epoch_clock import Now, epoch_clock_sensor, is_scheduled, utc_now
from dagster_project.names import job_name
from dagster_project.replays import replay_sensor
from dagster_project.resources import LedgerResource, SparkResource, StateStoreResource
from dagster_project.sensors import DEFAULT_INTERVAL, frontier_sensor
from dagster_project.upqueries import partial_stages, upquery_job, upquery_sensor
from pipelines.examples import bank
from pipelines.stages.pipeline import Pipeline


def pipeline_job(pipeline: Pipeline) -> dg.UnresolvedAssetJobDefinition:
    """The job that materializes a pipeline's stages for one epoch, in one process."""
    return dg.define_asset_job(
        job_name(pipeline.name),
        selection=dg.AssetSelection.assets(*stage_asset_keys(pipeline)),
        executor_def=dg.in_process_executor,
        description=f"Runs stages of {pipeline.name} for one epoch, upstream first.",
    )


def build_definitions(
    pipelines: Sequence[Pipeline],
    *,
    spark: SparkResource | None = None,
    ledger: LedgerResource | None = None,
    state: StateStoreResource | None = None,
    sensor_interval: int = DEFAULT_INTERVAL,
    sensor_status: dg.DefaultSensorStatus = dg.DefaultSensorStatus.RUNNING,
    clock_interval: int = CLOCK_INTERVAL,
    now: Now = utc_now,
) -> dg.Definitions:
    """Definitions for ``pipelines`` sharing one Spark, ledger and state store. ``now`` is what
    the epoch clock sensors take for the current time.

    Unset resources come from the environment as the CLI reads it (``$EPOCHGATE_SPARK``,
    ``$EPOCHGATE_LEDGER``, ``$EPOCHGATE_DATA``, ``$EPOCHGATE_HOME``); the state store defaults
    to ``state.duckdb`` beside the ledger.
    """
    names = [p.name for p in pipelines]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(f"pipelines named more than once: {', '.join(repeated)}")
    assets: list[dg.AssetsDefinition | dg.AssetSpec] = []
    jobs: list[dg.JobDefinition | dg.UnresolvedAssetJobDefinition] = []
    sensors: list[dg.SensorDefinition] = []
    for pipeline in pipelines:
        pipeline.graph()  # a pipeline that cannot compile fails here, naming the problem
        job = pipeline_job(pipeline)
        assets += [*source_specs(pipeline), stage_assets(pipeline)]
        jobs.append(job)
        sensors.append(
            frontier_sensor(
                pipeline,
                job,
                minimum_interval_seconds=daemon_interval(sensor_interval),
                default_status=sensor_status,
            )
        )
        if partial_stages(pipeline):
            upquery = upquery_job(pipeline)
            jobs.append(upquery)
            sensors.append(
                upquery_sensor(
                    pipeline,
                    upquery,
                    minimum_interval_seconds=daemon_interval(sensor_interval),
                    default_status=sensor_status,
                )
            )
        if pipeline.replayed_sources():
            sensors.append(
                replay_sensor(
                    pipeline,
                    minimum_interval_seconds=daemon_interval(sensor_interval),
                    default_status=sensor_status,
                )
            )
        if is_scheduled(pipeline):
            sensors.append(
                epoch_clock_sensor(
                    pipeline,
                    minimum_interval_seconds=daemon_interval(clock_interval),
                    default_status=sensor_status,
                    now=now,
                )
            )
    return dg.Definitions(
        assets=assets,
        jobs=jobs,
        # Runs of any other selection (a backfill's, the UI's) in one process too: a step
        # subprocess per run would start another interpreter and Spark session.
        executor=dg.in_process_executor,
        sensors=sensors,
        resources={
            "spark": spark or SparkResource.from_settings(),
            "ledger": ledger or LedgerResource.from_settings(),
            "state": state or StateStoreResource(),
        },
    )


DAEMON_LOOP_SECONDS = 5
"""How often Dagster's sensor daemon looks at its sensors (its loop, every 5 s in 1.13)."""


def daemon_interval(interval: int) -> int:
    """The ``minimum_interval_seconds`` to give a sensor that should tick every ``interval``
    seconds under the daemon.

    The daemon evaluates a sensor on the first pass of its loop (every ``DAEMON_LOOP_SECONDS``)
    at which ``minimum_interval_seconds`` have passed since the sensor's last tick. With the
    interval itself as the minimum, a pass a few milliseconds early skips it and the tick comes
    a whole loop late: under ``dagster dev`` with an interval of 5 s the wait from the last
    advance to the run requested was a median 6.2 s over 3 epochs. One second of slack makes
    the tick land on the first pass at or after the interval.

    >>> [daemon_interval(n) for n in (1, 2, 5, 30)]
    [1, 1, 4, 29]
    """
    return max(1, interval - 1)


SENSOR_INTERVAL_ENV = "EPOCHGATE_SENSOR_INTERVAL"
"""Seconds between two ticks of each frontier (and upquery) sensor that ``defs`` defines."""


def sensor_interval_setting() -> int:
    """``$EPOCHGATE_SENSOR_INTERVAL`` (whole seconds, at least 1), else 30."""
    text = os.environ.get(SENSOR_INTERVAL_ENV, "").strip()
    if not text:
        return DEFAULT_INTERVAL
    if not text.isascii() or not text.isdigit() or int(text) < 1:
        raise ValueError(
            f"{SENSOR_INTERVAL_ENV} must be a whole number of seconds, at least 1; got {text!r}"
        )
    return int(text)


defs = build_definitions([bank.pipeline()], sensor_interval=sensor_interval_setting())
"""What ``workspace.yaml`` loads: the ``bank`` example, with settings from the environment
(``$EPOCHGATE_SENSOR_INTERVAL`` sets how often its frontier and upquery sensors tick)."""
