"""Dagster definitions built from epochgate pipelines: epoch partitions, stage assets, sensors."""

from __future__ import annotations

from dagster_project.definitions import build_definitions

__all__ = ["build_definitions"]
