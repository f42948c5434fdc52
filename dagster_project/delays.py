"""Delayed stages in Dagster's graph: how their partitions map, said where Dagster cannot map it.

A stage with ``delay=k`` commits its run at epoch t as the message of epoch t + k, so in the
ledger a stage that reads it reads, at epoch t, what its run at t - k wrote: partition t - k of
its asset. Dagster 1.13 has no partition mapping with an offset between dynamic partitions:
``TimeWindowPartitionMapping(start_offset=...)`` refuses any partitions but time windows, and a
``PartitionMapping`` subclass of one's own is deprecated and left out of the asset graph that
the webserver and the daemon load (they infer the identity instead), so it would hold inside the
code location only. The dependency therefore stays partition t on partition t, and the assets
say how it maps: the delayed stage in its description (and its ``delay`` metadata), each stage
that reads it in its description and its ``partition_offsets`` metadata (``{"late": -2}``: its
partition t reads partition t - 2 of ``late``).
"""

from __future__ import annotations

from pipelines.stages.pipeline import Pipeline, Stage

NO_MAPPING = "Dagster has no partition mapping with an offset for dynamic partitions"


def delayed_inputs(pipeline: Pipeline, stage: Stage) -> dict[str, int]:
    """The stages ``stage`` depends on in the asset graph whose output is delayed, with the
    offset of the partition it reads: ``-delay``."""
    return {
        upstream: -pipeline.stage(upstream).delay
        for upstream in stage.lineage()
        if pipeline.stage(upstream).delay
    }


def delay_notes(pipeline: Pipeline, stage: Stage) -> list[str]:
    """What the asset page says of how a delayed stage's partitions map (nothing for a stage
    that neither is delayed nor reads a delayed one)."""
    notes = []
    if stage.delay:
        notes.append(
            f"Partition t of this asset is its run at epoch t, whose output the stages reading "
            f"it read at epoch t + {stage.delay}; Dagster's graph shows them depending on "
            f"partition t ({NO_MAPPING})."
        )
    for upstream, offset in delayed_inputs(pipeline, stage).items():
        notes.append(
            f"Partition t reads partition t - {-offset} of {upstream} (its output for epoch "
            f"t - {-offset} belongs to epoch t); Dagster's graph shows partition t ({NO_MAPPING})."
        )
    return notes
