"""Progress tracking: pointstamp counts, the frontiers they imply, and when a node is ready.

A ``Tracker`` observes progress batches (atomic lists of ``(location, time, delta)``) and keeps,
per location, the counts of its pointstamps and the *implications*: the least times that may
still arrive there, through the minimal path summaries from every positive pointstamp. A change
moves on to the next location only when it moves a frontier; changes are handled in time order,
so support that a cycle lends to itself cancels out instead of circling forever.

``ready(node, t)``: every positive pointstamp that could still result in a time ``<= t`` at one
of the node's inputs is a message already waiting at one of those inputs at exactly ``t``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from heapq import heappop, heappush
from typing import TYPE_CHECKING, Any

from progress.antichain import Antichain, MutableAntichain
from progress.errors import InvalidTimeError, UnknownLocationError, UnknownNodeError
from progress.location import Location, Source, Target
from progress.timestamp import MAX_EPOCH, Time, less_equal, validate_time

if TYPE_CHECKING:
    from progress.graph import Graph

Update = tuple[Location, Time, int]
"""One entry of a progress batch: ``(location, time, delta)``."""


@dataclass(frozen=True, slots=True)
class Blocker:
    """A positive pointstamp that keeps a node from being ready for a time.

    ``location`` holds ``count`` at ``time``; along a path it results in ``results_in`` at the
    node's input ``reaches``.
    """

    location: Location
    time: Time
    count: int
    reaches: Target
    results_in: Time

    def describe(self) -> str:
        what = "capabilities" if isinstance(self.location, Source) else "messages"
        return (
            f"{self.location} holds {self.count} {what} at {self.time}, "
            f"which can still reach {self.reaches} at {self.results_in}"
        )


class Tracker:
    """Counts pointstamps of one graph and answers frontier and readiness questions.

    A new tracker has no counts; apply ``initial_batch()`` (the initial capabilities) first, as
    every observer of the same dataflow does.
    """

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        n = len(graph.locations)
        self._index = graph.index
        self._pointstamps: list[MutableAntichain[Any]] = [MutableAntichain() for _ in range(n)]
        self._implications: list[MutableAntichain[Any]] = [MutableAntichain() for _ in range(n)]
        self._successors = graph.successors
        self._epochs = type(graph.minimum) is int
        self._inputs: dict[str, tuple[int, ...]] = {
            name: tuple(self._index[t] for t in spec.targets())
            for name, spec in graph.nodes.items()
        }
        self._reaching: dict[str, list[tuple[int, list[tuple[int, tuple[Any, ...]]]]]] = {}

    # -- applying progress -------------------------------------------------------------------

    def initial_batch(self) -> list[Update]:
        """The initial capabilities of every output, as a batch to apply like any other."""
        return self.graph.initial_batch()

    def update(self, location: Location, time: Time, delta: int) -> None:
        """Apply one pointstamp change."""
        self.apply(((location, time, delta),))

    def apply(self, batch: Iterable[Update]) -> None:
        """Apply an atomic progress batch: validated whole before any count changes."""
        index = self._index
        grouped: dict[int, list[tuple[Time, int]]] = {}
        for location, time, delta in batch:
            i = index.get(location)
            if i is None:
                raise UnknownLocationError(location)
            if self._epochs:
                if type(time) is not int or not 0 <= time <= MAX_EPOCH:
                    raise InvalidTimeError(time, f"{location} takes int epochs in 0 .. {MAX_EPOCH}")
            else:
                validate_time(time, self.graph.minimum)
            if type(delta) is not int:
                raise TypeError(f"deltas are ints, got {delta!r} for {location} at {time}")
            changes = grouped.get(i)
            if changes is None:
                grouped[i] = [(time, delta)]
            else:
                changes.append((time, delta))
        heap: list[tuple[Any, int, int]] = []
        pointstamps = self._pointstamps
        for i, changes in grouped.items():
            for time, delta in pointstamps[i].update_iter(changes):
                heappush(heap, (time, i, delta))
        if heap:
            self._propagate(heap)

    def _propagate(self, heap: list[tuple[Any, int, int]]) -> None:
        implications = self._implications
        successors = self._successors
        while heap:
            time, i, delta = heappop(heap)
            while heap and heap[0][1] == i and heap[0][0] == time:
                delta += heappop(heap)[2]
            if not delta:
                continue
            for changed, sign in implications[i].update_iter(((time, delta),)):
                for nxt, summary in successors[i]:
                    if summary is None:
                        heappush(heap, (changed, nxt, sign))
                    else:
                        result = summary.results_in(changed)
                        if result is not None:
                            heappush(heap, (result, nxt, sign))

    # -- questions ---------------------------------------------------------------------------

    def _location(self, location: Location) -> int:
        i = self._index.get(location)
        if i is None:
            raise UnknownLocationError(location)
        return i

    def count(self, location: Location, time: Time) -> int:
        """The accumulated count of the pointstamp ``(location, time)``; may be negative."""
        return self._pointstamps[self._location(location)].count_for(time)

    def frontier(self, location: Location) -> Antichain[Time]:
        """The least times that may still appear at ``location`` (empty: nothing more will)."""
        return self._implications[self._location(location)].frontier()

    def pointstamps(self) -> list[tuple[Location, Time, int]]:
        """Every pointstamp with a positive count, in a stable order."""
        return [
            (loc, t, c)
            for loc, counts in zip(self.graph.locations, self._pointstamps, strict=True)
            for t, c in counts.positive()
        ]

    def _node_inputs(self, node: str) -> tuple[int, ...]:
        inputs = self._inputs.get(node)
        if inputs is None:
            raise UnknownNodeError(node, list(self.graph.nodes))
        return inputs

    def ready(self, node: str, time: Time) -> bool:
        """True when every message ``node`` will ever receive at a time ``<= time`` is already
        waiting at its inputs, at exactly ``time`` (earlier ones would have to be consumed first).
        """
        for i in self._node_inputs(node):
            implications = self._implications[i]
            for f in implications.frontier_elements():
                if less_equal(f, time):
                    if f != time:
                        return False
                    # `time` is implied here; only this input's own messages at `time` may imply
                    # it (other inputs' messages reach here strictly later: no stalling cycles).
                    own = 1 if time in self._pointstamps[i].frontier_elements() else 0
                    if implications.count_for(time) > own:
                        return False
        return True

    def blockers(self, node: str, time: Time) -> list[Blocker]:
        """The positive pointstamps that keep ``node`` from being ready for ``time``."""
        inputs = self._node_inputs(node)
        own = set(inputs)
        found: list[Blocker] = []
        for at, paths in self._reaching_inputs(node):
            location = self.graph.locations[at]
            for t, count in self._pointstamps[at].positive():
                if at in own and t == time:
                    continue
                hit = _first_result_at_or_before(t, paths, time)
                if hit is not None:
                    reaches, result = hit
                    found.append(
                        Blocker(location, t, count, self.graph.locations[reaches], result)  # type: ignore[arg-type]
                    )
        return found

    def _reaching_inputs(self, node: str) -> list[tuple[int, list[tuple[int, tuple[Any, ...]]]]]:
        cached = self._reaching.get(node)
        if cached is None:
            paths: dict[int, list[tuple[int, tuple[Any, ...]]]] = {}
            for i in self._node_inputs(node):
                for at, summaries in self.graph.reaching(i):
                    paths.setdefault(at, []).append((i, summaries))
            cached = sorted(paths.items())
            self._reaching[node] = cached
        return cached

    # -- stage runs --------------------------------------------------------------------------

    def stage_batch(self, node: str, time: Time) -> list[Update]:
        """The batch of running ``node`` once for ``time`` in this tracker's view.

        It consumes every message waiting at the node's inputs at exactly ``time`` and announces
        one message at every connected target for each time its outputs reach from those inputs.
        Empty when no message waits (nothing grants the right to produce).
        """
        spec = self.graph.node(node)
        batch: list[Update] = []
        fed: list[int] = []
        for i, target in enumerate(spec.targets()):
            count = self.count(target, time)
            if count > 0:
                batch.append((target, time, -count))
                fed.append(i)
        for o, source in enumerate(spec.sources()):
            times: set[Time] = set()
            for i in fed:
                for summary in spec.summaries.get((i, o), ()):
                    result = summary.results_in(time)  # type: ignore[arg-type]
                    if result is not None:
                        times.add(result)
            for t in sorted(times):
                batch.extend((target, t, 1) for target in self.graph.edges.get(source, ()))
        return batch


def _first_result_at_or_before(
    t: Time, paths: list[tuple[int, tuple[Any, ...]]], bound: Time
) -> tuple[int, Time] | None:
    for reaches, summaries in paths:
        for summary in summaries:
            result = summary.results_in(t)
            if result is not None and less_equal(result, bound):
                return reaches, result
    return None
