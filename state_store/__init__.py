"""Keyed materializations of stateful stages: full or partial, holes, upqueries and eviction."""

from __future__ import annotations

__all__: list[str] = []
