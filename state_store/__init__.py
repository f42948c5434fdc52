"""Keyed state of stateful stages, with history by epoch (full state only: partial state,
upqueries and eviction are not built yet)."""

from __future__ import annotations

from state_store.keyed import KeyedState, StateStoreError

__all__ = ["KeyedState", "StateStoreError"]
