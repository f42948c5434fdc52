"""Keyed state of stateful and aggregate stages, with history by epoch; for partial stages,
their present keys and the fills and evictions of keys."""

from __future__ import annotations

from progress.errors import StateStoreError
from state_store.keyed import KeyedState
from state_store.partial import Key, PartialKeys, StateCounts, StateRead

__all__ = ["Key", "KeyedState", "PartialKeys", "StateCounts", "StateRead", "StateStoreError"]
