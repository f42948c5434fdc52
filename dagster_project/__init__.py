"""Dagster definitions built from epochgate pipelines: epoch partitions, stage assets, sensors."""

from __future__ import annotations

from dagster_project.definitions import build_definitions, pipeline_job
from dagster_project.partitions import epoch_key, epoch_partitions, key_epoch
from dagster_project.resources import (
    LedgerResource,
    SparkResource,
    StateStoreResource,
    build_runtime,
)

__all__ = [
    "build_definitions",
    "pipeline_job",
    "LedgerResource",
    "SparkResource",
    "StateStoreResource",
    "build_runtime",
    "epoch_key",
    "epoch_partitions",
    "key_epoch",
]
