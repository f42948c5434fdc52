"""The Dagster names of a pipeline's parts: asset keys, check names, job and sensor, run tags.

A stage ``valid_cards`` of pipeline ``bank`` is the asset ``bank/valid_cards``; its epochs run in
the job ``bank_job``, requested by the sensor ``bank_frontier``. The pending reads of a partial
stage are filled by the job ``bank_upquery``, requested by the sensor ``bank_upqueries``.
"""

from __future__ import annotations

import dagster as dg

PIPELINE_TAG = "epochgate/pipeline"
"""Run tag: the pipeline a run belongs to."""
STAGES_TAG = "epochgate/stages"
"""Run tag: the stages a run was requested for, comma-separated, upstream first."""
EPOCH_TAG = "epochgate/epoch"
"""Run tag: the epoch a run was requested for (an int, also the run's partition)."""
UPQUERY_TAG = "epochgate/upquery"
"""Run tag of an upquery run: the partial stage whose pending reads it fills."""
WORKER_TAG = "epochgate/run_worker"
"""Run tag of a run ``WarmRunLauncher`` launched: the pid of the warm worker executing it."""

LEDGER_CHECK = "ledger_consistent"
"""The asset check of every stage: the ledger agrees with the materialized epoch."""


def stage_key(pipeline: str, stage: str) -> dg.AssetKey:
    """The asset key of a stage (or a source): ``[pipeline, stage]``."""
    return dg.AssetKey([pipeline, stage])


def key_stage(pipeline: str, key: dg.AssetKey) -> str:
    """The stage an asset key of ``pipeline`` names."""
    if len(key.path) != 2 or key.path[0] != pipeline:
        raise ValueError(f"asset {key.to_user_string()!r} is not a stage of pipeline {pipeline!r}")
    return key.path[1]


def check_key(pipeline: str, stage: str) -> dg.AssetCheckKey:
    """The key of a stage's ledger check."""
    return dg.AssetCheckKey(stage_key(pipeline, stage), LEDGER_CHECK)


def job_name(pipeline: str) -> str:
    return f"{pipeline}_job"


def sensor_name(pipeline: str) -> str:
    return f"{pipeline}_frontier"


def upquery_job_name(pipeline: str) -> str:
    """The job that fills the pending reads of a partial stage."""
    return f"{pipeline}_upquery"


def upquery_op_name(pipeline: str) -> str:
    """The one op of the upquery job (a repository refuses an op named like a job)."""
    return f"{pipeline}_fill_pending"


def upquery_sensor_name(pipeline: str) -> str:
    return f"{pipeline}_upqueries"


def assets_name(pipeline: str) -> str:
    """The name of the op that runs a pipeline's stages."""
    return f"{pipeline}_stages"


PARTITION_TAG = "dagster/partition"
"""Dagster's own run tag for the partition a run materializes."""
BACKFILL_TAG = "dagster/backfill"
"""Dagster's own run tag for the backfill a run belongs to."""


def clock_sensor_name(pipeline: str) -> str:
    return f"{pipeline}_epoch_clock"


def replay_sensor_name(pipeline: str) -> str:
    """The sensor that feeds a pipeline's replayed sources from their captures."""
    return f"{pipeline}_replay"
