"""Pipelines on Spark: the stage API, the per-epoch run, the CLI driver and example pipelines."""

from __future__ import annotations

__all__: list[str] = []
