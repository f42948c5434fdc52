"""What Dagster already has under way for a pipeline: queued or running runs, and the partitions
asset backfills in progress have yet to run. The frontier sensor leaves their stages out.
"""

from __future__ import annotations

import dagster as dg

from dagster_project.assets import stage_asset_keys

# A backfill's status enum is not exported publicly in Dagster 1.13, and
# ``instance.get_backfills(status=...)`` takes only that enum.
from dagster_project.internals import BulkActionStatus
from dagster_project.names import PARTITION_TAG, job_name
from dagster_project.partitions import EpochKeyError, key_epoch
from pipelines.stages.pipeline import Pipeline

__all__ = ["IN_FLIGHT", "BulkActionStatus", "backfill_stages", "in_flight_stages"]

IN_FLIGHT = (
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.CANCELING,
)
"""Run statuses whose stages must not be requested again: the run may still commit them."""


def in_flight_stages(instance: dg.DagsterInstance, pipeline: Pipeline) -> dict[int, set[str]]:
    """Per epoch, the stages of ``pipeline`` that a queued or running Dagster run will
    materialize (whoever launched it: this sensor, a backfill or the UI), and those an asset
    backfill in progress has yet to launch (it will run them itself)."""
    p = pipeline.name
    everything = set(stage_asset_keys(pipeline))
    out = backfill_stages(instance, pipeline)
    for run in instance.get_runs(filters=dg.RunsFilter(statuses=list(IN_FLIGHT))):
        partition = run.tags.get(PARTITION_TAG)
        if partition is None:
            continue
        try:
            epoch = key_epoch(partition)
        except EpochKeyError:
            continue
        if run.asset_selection is not None:
            keys = set(run.asset_selection) & everything
        elif run.job_name == job_name(p):
            keys = everything
        else:
            continue
        if keys:
            out.setdefault(epoch, set()).update(k.path[1] for k in keys)
    return out


def backfill_stages(instance: dg.DagsterInstance, pipeline: Pipeline) -> dict[int, set[str]]:
    """Per epoch, the stages of ``pipeline`` that asset backfills in progress target and have
    neither materialized nor given up on."""
    everything = set(stage_asset_keys(pipeline))
    out: dict[int, set[str]] = {}
    for backfill in instance.get_backfills(status=BulkActionStatus.REQUESTED):
        data = backfill.asset_backfill_data
        if data is None:  # a job backfill: its runs are seen once queued
            continue
        left = data.target_subset - data.materialized_subset - data.failed_and_downstream_subset
        for found in left.iterate_asset_partitions():
            if found.asset_key not in everything or found.partition_key is None:
                continue
            try:
                epoch = key_epoch(found.partition_key)
            except EpochKeyError:
                continue
            out.setdefault(epoch, set()).add(found.asset_key.path[1])
    return out
