"""The factory that turns pipelines into Dagster ``Definitions``.

Per pipeline: its epochs as dynamic partitions, one asset per stage (sources as external assets)
with the pipeline's edges as dependencies, a ledger check per stage, a job that runs the stages
in one process (a process per step would start a JVM per step), a frontier sensor, for a
pipeline with scheduled epochs (a clock, or sources closed by time or done-marker) an epoch clock
sensor, and for a pipeline with partial stages an upquery job and sensor that fill reads
recorded as pending (``dagster_project.upqueries``; it ticks as often as the frontier sensor),
and for a pipeline with replayed sources a replay sensor that feeds their captured events
(``dagster_project.replays``; as often too). Nothing is built, and nothing read from the
environment, until ``build_definitions`` is called.

    defs = build_definitions([my_pipeline], ledger=LedgerResource(path="/srv/ledger.duckdb"))
"""

from __future__ import annotations

from collections.abc import Sequence

import dagster as dg

from dagster_project.assets import source_specs, stage_asset_keys, stage_assets
from dagster_project.epoch_clock import DEFAULT_INTERVAL as CLOCK_INTERVAL
from dagster_project.epoch_clock import Now, epoch_clock_sensor, is_scheduled, utc_now
from dagster_project.names import job_name
from dagster_project.replays import replay_sensor
from dagster_project.resources import LedgerResource, SparkResource, StateStoreResource
from dagster_project.sensors import frontier_sensor
from dagster_project.settings import sensor_interval_setting
from dagster_project.upqueries import partial_stages, upquery_job, upquery_sensor
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
    sensor_interval: int | None = None,
    sensor_status: dg.DefaultSensorStatus = dg.DefaultSensorStatus.RUNNING,
    clock_interval: int = CLOCK_INTERVAL,
    now: Now = utc_now,
) -> dg.Definitions:
    """Definitions for ``pipelines`` sharing one Spark, ledger and state store. ``now`` is what
    the epoch clock sensors take for the current time.

    What is not given comes from the environment, read now (``dagster_project.settings``):
    the seconds between two ticks of each frontier, upquery and replay sensor from
    ``$EPOCHGATE_SENSOR_INTERVAL`` (else 30), the resources as the CLI reads them
    (``$EPOCHGATE_SPARK``, ``$EPOCHGATE_LEDGER``, ``$EPOCHGATE_DATA``, ``$EPOCHGATE_HOME``);
    the state store defaults to ``state.duckdb`` beside the ledger.
    """
    interval = sensor_interval_setting() if sensor_interval is None else sensor_interval
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
                minimum_interval_seconds=daemon_interval(interval),
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
                    minimum_interval_seconds=daemon_interval(interval),
                    default_status=sensor_status,
                )
            )
        if pipeline.replayed_sources():
            sensors.append(
                replay_sensor(
                    pipeline,
                    minimum_interval_seconds=daemon_interval(interval),
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


def daemon_interval(interval: int) -> int:
    """The ``minimum_interval_seconds`` to give a sensor that should tick every ``interval``
    seconds under the daemon.

    The daemon evaluates a sensor on the first pass of its loop (every 5 s in Dagster 1.13) at
    which ``minimum_interval_seconds`` have passed since the sensor's last tick. With the
    interval itself as the minimum, a pass a few milliseconds early skips it and the tick comes
    a whole loop late: under ``dagster dev`` with an interval of 5 s the wait from the last
    advance to the run requested was a median 6.2 s over 3 epochs. One second of slack makes
    the tick land on the first pass at or after the interval.

    >>> [daemon_interval(n) for n in (1, 2, 5, 30)]
    [1, 1, 4, 29]
    """
    return max(1, interval - 1)
