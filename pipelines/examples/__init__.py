"""Example pipelines that ship with epochgate."""

from __future__ import annotations

from collections.abc import Callable

from pipelines.dataflow import Pipeline


def registry() -> dict[str, Callable[[], Pipeline]]:
    """The example pipelines by name."""
    from pipelines.examples import bank

    return {"bank": bank.pipeline}


__all__ = ["registry"]
