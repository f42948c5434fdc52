"""The replay sensor of a pipeline with replayed sources: captured events fed in Dagster.

Each tick of ``{pipeline}_replay`` feeds what the captures hold now (``Runtime.replay()``: the
streams are checked whole first, and a refused stream fails the tick naming the directory, the
event and the rule, with nothing committed). Its cursor counts the events fed over all ticks
and its skip reason says how many this tick fed; the frontier sensor then requests the runs
the new events made ready. It needs no Spark.
"""

from __future__ import annotations

import dagster as dg

from dagster_project.names import replay_sensor_name
from dagster_project.resources import (
    LedgerResource,
    SparkResource,
    StateStoreResource,
    build_runtime,
)
from dagster_project.sensors import DEFAULT_INTERVAL, pipeline_sensor
from pipelines.stages.pipeline import Pipeline

__all__ = ["replay_sensor"]


def replay_sensor(
    pipeline: Pipeline,
    *,
    minimum_interval_seconds: int = DEFAULT_INTERVAL,
    default_status: dg.DefaultSensorStatus = dg.DefaultSensorStatus.RUNNING,
) -> dg.SensorDefinition:
    """The sensor that feeds ``pipeline``'s replayed sources from their captures."""
    p = pipeline.name

    def replay(
        context: dg.SensorEvaluationContext,
        spark: SparkResource,
        ledger: LedgerResource,
        state: StateStoreResource,
    ) -> dg.SensorResult:
        runtime = build_runtime(pipeline, spark=spark, ledger=ledger, state=state)  # no Spark
        fed = runtime.replay()
        total = int(context.cursor or 0) + fed
        if fed:
            text = (
                f"Fed {fed} captured event(s) into {p} ({total} in all); the frontier sensor "
                "runs what they made ready."
            )
        else:
            text = f"No new captured event for {p} ({total} fed in all)."
        return dg.SensorResult(skip_reason=text, cursor=str(total))

    return pipeline_sensor(
        replay,
        name=replay_sensor_name(p),
        job=None,
        description=(
            f"Feeds the replayed sources of {p} the events their captures hold now; the "
            "frontier sensor then runs what they made ready."
        ),
        minimum_interval_seconds=minimum_interval_seconds,
        default_status=default_status,
    )
