"""Accumulated changes: a multiset of updates ``(item, delta)`` that compacts by summing.

A ``ChangeBatch`` is how updates are gathered before they are applied: the same item updated
several times becomes one entry with the sum of the deltas, and entries whose sum is zero vanish.

>>> b = ChangeBatch()
>>> b.extend([("a", 2), ("b", 1), ("a", -2)])
>>> b.items(), len(b), b.is_empty()
([('b', 1)], 1, False)
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class ChangeBatch(Generic[K]):
    """A compacting multiset of ``(item, delta)`` updates."""

    __slots__ = ("_updates",)

    def __init__(self, updates: Iterable[tuple[K, int]] = ()) -> None:
        self._updates: dict[K, int] = {}
        self.extend(updates)

    def update(self, item: K, delta: int) -> None:
        """Add ``delta`` to ``item``'s accumulated count."""
        if not delta:
            return
        count = self._updates.get(item, 0) + delta
        if count:
            self._updates[item] = count
        else:
            del self._updates[item]

    def extend(self, updates: Iterable[tuple[K, int]]) -> None:
        """Apply every update."""
        for item, delta in updates:
            self.update(item, delta)

    def items(self) -> list[tuple[K, int]]:
        """The compacted updates, sorted by item, with no zero entries."""
        return sorted(self._updates.items())

    def drain(self) -> list[tuple[K, int]]:
        """The compacted updates, sorted, leaving the batch empty."""
        out = self.items()
        self._updates.clear()
        return out

    def is_empty(self) -> bool:
        return not self._updates

    def __len__(self) -> int:
        return len(self._updates)

    def __iter__(self) -> Iterator[tuple[K, int]]:
        return iter(self.items())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ChangeBatch):
            return NotImplemented
        return self._updates == other._updates

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ChangeBatch({self.items()!r})"
