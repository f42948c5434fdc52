"""The epoch clock sensor of a pipeline with scheduled epochs: it opens epochs and closes them.

Each tick adds a partition for every epoch the pipeline's clock has opened (only a sensor can add
dynamic partitions; a schedule cannot) and applies each source's close rule through
``pipelines.run.scheduling.close_epochs``: workers of time-based sources are advanced past every
epoch whose end plus grace has passed, workers of marker-based sources past every epoch they
delivered a done-marker for. The frontier sensor then runs what that made ready. The tick's
message lists what it closed and what each worker still waits for.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import dagster as dg

from dagster_project.names import clock_sensor_name
from dagster_project.partitions import epoch_key, epoch_partitions, partitions_name
from dagster_project.resources import LedgerResource
from dagster_project.sensors import pipeline_sensor
from pipelines.run.scheduling import close_epochs
from pipelines.stages.clock import Explicit
from pipelines.stages.pipeline import Pipeline

DEFAULT_INTERVAL = 60
"""Seconds between ticks of the epoch clock sensor."""

Now = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


def is_scheduled(pipeline: Pipeline) -> bool:
    """Whether ``pipeline`` has a clock or a source that is not closed by its workers."""
    return pipeline.clock is not None or any(
        not isinstance(pipeline.close_rule(s.name), Explicit)
        for s in pipeline.stages.values()
        if s.is_source
    )


def epoch_clock_sensor(
    pipeline: Pipeline,
    *,
    minimum_interval_seconds: int = DEFAULT_INTERVAL,
    default_status: dg.DefaultSensorStatus = dg.DefaultSensorStatus.RUNNING,
    now: Now = utc_now,
) -> dg.SensorDefinition:
    """The sensor that opens ``pipeline``'s epochs and applies its sources' close rules."""
    p = pipeline.name
    partitions = epoch_partitions(p)
    clock = pipeline.clock
    schedule = f"cron {clock.cron!r}, epochs of {clock.length}" if clock else "no clock"

    def epoch_clock(context: dg.SensorEvaluationContext, ledger: LedgerResource) -> dg.SensorResult:
        tick = close_epochs(ledger.ledger(), pipeline, now())
        for closing in tick.closed:
            context.log.info(closing.describe())
        adds = []
        if tick.opened:
            known = set(context.instance.get_dynamic_partitions(partitions_name(p)))
            new = [k for k in map(epoch_key, range(tick.opened)) if k not in known]
            if new:
                adds.append(partitions.build_add_request(new))
        return dg.SensorResult(
            skip_reason=" ".join(f"{line}." for line in tick.lines()),
            dynamic_partitions_requests=adds,
        )

    return pipeline_sensor(
        epoch_clock,
        name=clock_sensor_name(p),
        job=None,
        description=(
            f"Opens the epochs of {p} ({schedule}) as partitions and closes the epochs of its "
            "sources that close by time or by done-marker."
        ),
        minimum_interval_seconds=minimum_interval_seconds,
        default_status=default_status,
    )
