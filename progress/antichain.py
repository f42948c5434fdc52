"""Frontiers: antichains of times, fixed (`Antichain`) or kept from counts (`MutableAntichain`).

An antichain holds mutually incomparable elements; as a frontier it stands for every time
greater than or equal to one of them. Elements are times, or path summaries (which share the
``less_equal`` / ``less_than`` interface).

Laws (tested in ``tests/progress/test_antichain_laws.py``):

* ``Antichain`` elements are pairwise incomparable, and every inserted element is greater than
  or equal to some element (minimality); equality and hash ignore insertion order;
* ``MutableAntichain.frontier()`` is exactly the set of minimal times with a positive count;
  a time whose count is zero or negative never enters it;
* the changes ``update_iter`` returns, applied to the old frontier, give the new one.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, Generic, TypeVar

from progress.timestamp import less_equal, less_than

T = TypeVar("T")


def _le(a: Any, b: Any) -> bool:
    return a <= b if type(a) is int else bool(a.less_equal(b))


def _lt(a: Any, b: Any) -> bool:
    return a < b if type(a) is int else bool(a.less_than(b))


class Antichain(Generic[T]):
    """A set of mutually incomparable elements, kept minimal as elements are inserted.

    >>> a = Antichain([5, 3, 7])
    >>> a.elements, a.less_equal(4), a.less_than(3)
    ((3,), True, False)
    """

    __slots__ = ("_elements",)

    def __init__(self, elements: Iterable[T] = ()) -> None:
        self._elements: list[T] = []
        self.extend(elements)

    def insert(self, element: T) -> bool:
        """Insert ``element`` unless some element is less than or equal to it; drop what it
        dominates. Returns whether it was inserted."""
        if any(_le(e, element) for e in self._elements):
            return False
        self._elements = [e for e in self._elements if not _le(element, e)]
        self._elements.append(element)
        return True

    def extend(self, elements: Iterable[T]) -> bool:
        """Insert each element; returns whether any was inserted."""
        inserted = False
        for element in elements:
            inserted |= self.insert(element)
        return inserted

    def less_than(self, t: T) -> bool:
        """True when some element is strictly less than ``t``."""
        return any(_lt(e, t) for e in self._elements)

    def less_equal(self, t: T) -> bool:
        """True when some element is less than or equal to ``t``."""
        return any(_le(e, t) for e in self._elements)

    @property
    def elements(self) -> tuple[T, ...]:
        """The elements in sorting order."""
        return tuple(sorted(self._elements))  # type: ignore[type-var]

    def is_empty(self) -> bool:
        return not self._elements

    def __iter__(self) -> Iterator[T]:
        return iter(self.elements)

    def __len__(self) -> int:
        return len(self._elements)

    def __bool__(self) -> bool:
        return bool(self._elements)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Antichain):
            return NotImplemented
        return set(self._elements) == set(other._elements)

    def __hash__(self) -> int:
        return hash(frozenset(self._elements))

    def __repr__(self) -> str:
        return f"Antichain({list(self.elements)!r})"


class MutableAntichain(Generic[T]):
    """A multiset of times with integer counts, and the frontier of those with a positive count.

    Counts may be transiently negative (an update seen before the one it cancels); a time with
    a count of zero or less never enters the frontier. Times with a zero count are forgotten, so
    the cost of an update depends on the times still open, not on how many have closed.

    >>> m = MutableAntichain()
    >>> m.update_iter([(3, 1), (5, 1)])
    [(3, 1)]
    >>> m.update_iter([(3, -1)])
    [(3, -1), (5, 1)]
    >>> m.frontier().elements
    (5,)
    """

    __slots__ = ("_counts", "_frontier")

    def __init__(self) -> None:
        self._counts: dict[T, int] = {}
        self._frontier: list[T] = []

    def update_iter(self, changes: Iterable[tuple[T, int]]) -> list[tuple[T, int]]:
        """Apply ``(time, delta)`` changes; return the frontier's changes as ``(time, +1|-1)``.

        A change strictly beyond the frontier cannot move it, nor can a decrement of a time that
        no frontier element reaches; only other changes pay for recomputing the frontier.
        """
        counts = self._counts
        frontier = self._frontier
        rebuild = False
        for time, delta in changes:
            if not delta:
                continue
            count = counts.get(time, 0) + delta
            if count:
                counts[time] = count
            else:
                del counts[time]
            if rebuild:
                continue
            if type(time) is int:
                # Epochs are totally ordered: the frontier has at most one element.
                if frontier:
                    f = frontier[0]
                    if time > f:  # type: ignore[operator]
                        continue
                    if time == f:
                        if count > 0:
                            continue
                    elif delta < 0:
                        continue
                elif count <= 0:
                    continue
                rebuild = True
            else:
                if any(_lt(f, time) for f in frontier):
                    continue
                if delta < 0 and not any(_le(f, time) for f in frontier):
                    continue
                if delta > 0 and count > 0 and time in frontier:
                    continue
                rebuild = True
        if not rebuild:
            return []
        new = self._minimal_positive()
        if new == frontier:
            return []
        old_set = set(frontier)
        new_set = set(new)
        out: list[tuple[T, int]] = [(t, -1) for t in frontier if t not in new_set]
        out.extend((t, 1) for t in new if t not in old_set)
        self._frontier = new
        return out

    def _minimal_positive(self) -> list[T]:
        positive = [t for t, c in self._counts.items() if c > 0]
        if not positive:
            return []
        if type(positive[0]) is int:
            return [min(positive)]  # type: ignore[type-var]
        positive.sort()
        # Sorting order is compatible with the partial order: a later time never lies below an
        # earlier one, so one pass against the minimal elements kept so far suffices.
        minimal: list[T] = []
        for t in positive:
            if not any(_le(m, t) for m in minimal):
                minimal.append(t)
        return minimal

    def frontier(self) -> Antichain[T]:
        """The minimal times with a positive count."""
        return Antichain(self._frontier)

    def frontier_elements(self) -> list[T]:
        """The frontier's elements, without building an ``Antichain`` (hot paths)."""
        return self._frontier

    def less_than(self, t: T) -> bool:
        """True when some frontier element is strictly less than ``t``."""
        return any(_lt(f, t) for f in self._frontier)

    def less_equal(self, t: T) -> bool:
        """True when some frontier element is less than or equal to ``t``."""
        return any(_le(f, t) for f in self._frontier)

    def count_for(self, t: T) -> int:
        """The accumulated count of ``t`` (zero if never seen or cancelled)."""
        return self._counts.get(t, 0)

    def positive(self) -> list[tuple[T, int]]:
        """Every time with a positive count, in sorting order, with its count."""
        return sorted((t, c) for t, c in self._counts.items() if c > 0)

    def is_empty(self) -> bool:
        """True when no time has a positive count."""
        return not self._frontier

    def __repr__(self) -> str:
        return f"MutableAntichain(frontier={self.frontier().elements!r})"


__all__ = ["Antichain", "MutableAntichain", "less_equal", "less_than"]
