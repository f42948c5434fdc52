"""Keyed materializations of stateful stages: full or partial, holes, upqueries and eviction."""

from __future__ import annotations

from state_store.keyed import KeyedState, StateStoreError

__all__ = ["KeyedState", "StateStoreError"]
