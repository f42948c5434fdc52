"""Example pipelines that ship with epochgate."""

from __future__ import annotations

from collections.abc import Callable

from pipelines.stages.pipeline import Pipeline


def _bank() -> Pipeline:
    from pipelines.examples import bank

    return bank.pipeline()


def registry() -> dict[str, Callable[[], Pipeline]]:
    """The example pipelines by name (naming them imports none of them)."""
    return {"bank": _bank}


__all__ = ["registry"]
