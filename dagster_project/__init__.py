"""Dagster definitions built from epochgate pipelines: epoch partitions, stage assets, sensors.

Importing it builds nothing and reads no environment: ``build_definitions`` does both, when it
is called. The bundled example's code location is ``dagster_project.examples.bank``; tools for
developing and testing are in ``dagster_project.dev``.
"""

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
