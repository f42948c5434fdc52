"""Dataflow graphs: a builder that validates, and the immutable compiled `Graph` it produces.

``GraphBuilder.compile()`` checks every reference, refuses dangling inputs and cycles that do not
strictly advance time, and computes the minimal path summaries between all locations. The
compiled ``Graph`` is shared by every ``Tracker`` that observes the same dataflow.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from progress.antichain import Antichain
from progress.errors import (
    CycleError,
    DanglingPortError,
    DuplicateNodeError,
    InvalidSummaryError,
    UnknownNodeError,
    UnknownPortError,
)
from progress.location import Location, Source, Target
from progress.summary import PathSummary, fits, identity_of
from progress.timestamp import Time, validate_time

Hop = tuple[int, PathSummary | None]
"""A step from one location to the next: the next location's index and the summary along the
step (``None`` for the identity, so the hot path skips calling it)."""


@dataclass(frozen=True, slots=True)
class NodeSpec:
    """One node of a compiled graph."""

    name: str
    inputs: int
    outputs: int
    summaries: Mapping[tuple[int, int], tuple[PathSummary, ...]]
    workers: int

    def sources(self) -> tuple[Source, ...]:
        return tuple(Source(self.name, o) for o in range(self.outputs))

    def targets(self) -> tuple[Target, ...]:
        return tuple(Target(self.name, i) for i in range(self.inputs))


class GraphBuilder:
    """Collects nodes and edges, then compiles them into a ``Graph`` (``Tracker(graph)`` tracks it).

    >>> from progress import Delay
    >>> b = GraphBuilder()
    >>> b.add_node("events", inputs=0, outputs=1, workers=2)
    >>> b.add_node("daily", inputs=1, outputs=1, summaries={(0, 0): [Delay(1)]})
    >>> b.add_edge(Source("events", 0), Target("daily", 0))
    >>> b.compile().summaries(Source("events", 0), Source("daily", 0))
    Antichain([Delay(k=1)])
    """

    def __init__(self, minimum: Time = 0) -> None:
        self._minimum = validate_time(minimum, minimum)
        self._nodes: dict[str, NodeSpec] = {}
        self._edges: list[tuple[Source, Target]] = []

    def add_node(
        self,
        name: str,
        inputs: int,
        outputs: int,
        summaries: Mapping[tuple[int, int], Sequence[PathSummary]] | None = None,
        workers: int = 1,
    ) -> None:
        """Add a node with ``inputs`` input ports and ``outputs`` output ports.

        ``summaries`` maps ``(input_port, output_port)`` to the path summaries from that input to
        that output; a missing pair means no path. ``None`` means the identity from every input
        to every output. Each output starts with ``workers`` capabilities at the minimum time.
        """
        if not isinstance(name, str) or not name:
            raise TypeError(f"node names are non-empty strings, got {name!r}")
        if name in self._nodes:
            raise DuplicateNodeError(name)
        for what, value in (("inputs", inputs), ("outputs", outputs), ("workers", workers)):
            if type(value) is not int or value < 0:
                raise TypeError(f"node {name!r}: {what} must be an int >= 0, got {value!r}")
        identity = identity_of(self._minimum)
        table: dict[tuple[int, int], tuple[PathSummary, ...]]
        if summaries is None:
            table = {(i, o): (identity,) for i in range(inputs) for o in range(outputs)}
        else:
            table = {}
            for (i, o), listed in summaries.items():
                if not 0 <= i < inputs:
                    raise UnknownPortError(Target(name, i), inputs)
                if not 0 <= o < outputs:
                    raise UnknownPortError(Source(name, o), outputs)
                for s in listed:
                    if not fits(s, self._minimum):
                        raise InvalidSummaryError(
                            s, f"node {name!r} ({i}, {o}) does not fit times like {self._minimum}"
                        )
                minimal = Antichain(listed).elements
                if minimal:
                    table[(i, o)] = minimal
        self._nodes[name] = NodeSpec(name, inputs, outputs, MappingProxyType(table), workers)

    def add_edge(self, source: Source, target: Target) -> None:
        """Connect an output port to an input port; time passes along unchanged."""
        if not isinstance(source, Source) or not isinstance(target, Target):
            raise TypeError(f"an edge goes from a Source to a Target, got {source!r} -> {target!r}")
        for location, count_of in ((source, "outputs"), (target, "inputs")):
            spec = self._nodes.get(location.node)
            if spec is None:
                raise UnknownNodeError(location.node, list(self._nodes))
            ports: int = getattr(spec, count_of)
            if location.port >= ports:
                raise UnknownPortError(location, ports)
        self._edges.append((source, target))

    def compile(self) -> Graph:
        """Validate and compile. Raises ``DanglingPortError`` or ``CycleError``."""
        fed = {t for _, t in self._edges}
        for spec in self._nodes.values():
            for target in spec.targets():
                if target not in fed:
                    raise DanglingPortError(target)
        return Graph(self._minimum, self._nodes.values(), self._edges)


class Graph:
    """An immutable, validated dataflow graph with its all-pairs minimal path summaries."""

    def __init__(
        self, minimum: Time, nodes: Iterable[NodeSpec], edges: Iterable[tuple[Source, Target]]
    ) -> None:
        self.minimum = minimum
        self.identity = identity_of(minimum)
        self.nodes: Mapping[str, NodeSpec] = MappingProxyType({n.name: n for n in nodes})
        edge_list = sorted(set(edges))
        outgoing: dict[Source, list[Target]] = {}
        for s, t in edge_list:
            outgoing.setdefault(s, []).append(t)
        self.edges: Mapping[Source, tuple[Target, ...]] = MappingProxyType(
            {s: tuple(ts) for s, ts in outgoing.items()}
        )
        hops = self._hops()
        _refuse_stalling_cycles(self, hops)
        self.locations: tuple[Location, ...] = _identity_topological_order(hops)
        self.index: Mapping[Location, int] = MappingProxyType(
            {loc: i for i, loc in enumerate(self.locations)}
        )
        self.successors: tuple[tuple[Hop, ...], ...] = tuple(
            tuple((self.index[nxt], None if s == self.identity else s) for nxt, s in hops[loc])
            for loc in self.locations
        )
        self._reach = [self._reach_from(i) for i in range(len(self.locations))]

    def _hops(self) -> dict[Location, list[tuple[Location, PathSummary]]]:
        hops: dict[Location, list[tuple[Location, PathSummary]]] = {}
        for spec in self.nodes.values():
            for src in spec.sources():
                hops[src] = [(t, self.identity) for t in self.edges.get(src, ())]
            for tgt in spec.targets():
                hops[tgt] = [
                    (Source(spec.name, o), s)
                    for (i, o), listed in sorted(spec.summaries.items())
                    if i == tgt.port
                    for s in listed
                ]
        return hops

    def _reach_from(self, start: int) -> dict[int, tuple[PathSummary, ...]]:
        found: dict[int, Antichain[PathSummary]] = {start: Antichain([self.identity])}
        work: list[tuple[int, PathSummary]] = [(start, self.identity)]
        while work:
            at, summary = work.pop()
            for nxt, step in self.successors[at]:
                composed = summary if step is None else summary.followed_by(step)  # type: ignore[arg-type]
                if composed is None:
                    continue
                if found.setdefault(nxt, Antichain()).insert(composed):
                    work.append((nxt, composed))
        return {i: a.elements for i, a in found.items() if a}

    def summaries(self, start: Location, end: Location) -> Antichain[PathSummary]:
        """The minimal summaries of all paths from ``start`` to ``end`` (identity if equal)."""
        return Antichain(self._reach[self.index[start]].get(self.index[end], ()))

    def reaching(self, end: int) -> list[tuple[int, tuple[PathSummary, ...]]]:
        """Every location index with a path to location ``end``, with the minimal summaries."""
        return [(i, r[end]) for i, r in enumerate(self._reach) if end in r]

    def depths(self) -> dict[str, int]:
        """Each node's longest distance from the inputs, ignoring the edges that close a cycle
        (found by a depth-first walk from the inputs): the order stages are listed and run in.
        """
        downstream: dict[str, set[str]] = {name: set() for name in self.nodes}
        for source, targets in self.edges.items():
            for target in targets:
                downstream[source.node].add(target.node)
        closing: set[tuple[str, str]] = set()
        state: dict[str, bool] = {}  # False while on the walk's path, True when finished

        def walk(node: str) -> None:
            state[node] = False
            for nxt in sorted(downstream[node]):
                if nxt not in state:
                    walk(nxt)
                elif state[nxt] is False:
                    closing.add((node, nxt))
            state[node] = True

        inputs_first = sorted(self.nodes, key=lambda n: (self.nodes[n].inputs > 0, n))
        for name in inputs_first:
            if name not in state:
                walk(name)
        indegree = dict.fromkeys(self.nodes, 0)
        for node, nexts in downstream.items():
            for nxt in nexts:
                if (node, nxt) not in closing:
                    indegree[nxt] += 1
        depth = dict.fromkeys(self.nodes, 0)
        ready = [name for name, d in indegree.items() if d == 0]
        while ready:
            node = ready.pop()
            for nxt in downstream[node]:
                if (node, nxt) in closing:
                    continue
                depth[nxt] = max(depth[nxt], depth[node] + 1)
                indegree[nxt] -= 1
                if indegree[nxt] == 0:
                    ready.append(nxt)
        return depth

    def node(self, name: str) -> NodeSpec:
        spec = self.nodes.get(name)
        if spec is None:
            raise UnknownNodeError(name, list(self.nodes))
        return spec

    def initial_batch(self) -> list[tuple[Location, Time, int]]:
        """Each output's initial capabilities: ``workers`` of them at the minimum time."""
        return [
            (src, self.minimum, spec.workers)
            for spec in self.nodes.values()
            if spec.workers
            for src in spec.sources()
        ]


def _refuse_stalling_cycles(
    graph: Graph, hops: Mapping[Location, list[tuple[Location, PathSummary]]]
) -> None:
    """Refuse any path from a node's input back to one of its own inputs that does not advance.

    A summary along a path advances unless every step is the identity, so it suffices to search
    the graph of identity steps. This is stricter than refusing port cycles: a stage whose output
    at ``t`` reaches another of its own inputs at ``t`` could never run ``t`` exactly once.
    """
    still: dict[Location, list[Location]] = {
        loc: [nxt for nxt, s in steps if not s.advances()] for loc, steps in hops.items()
    }
    for spec in graph.nodes.values():
        own = set(spec.targets())
        for start in spec.targets():
            path = _path_back(start, own, still)
            if path is not None:
                raise CycleError([start.node] + [t.node for t in path if isinstance(t, Target)])


def _path_back(
    start: Target, ends: set[Target], still: Mapping[Location, list[Location]]
) -> list[Location] | None:
    parent: dict[Location, Location] = {}
    stack: list[Location] = [start]
    seen: set[Location] = set()
    while stack:
        at = stack.pop()
        for nxt in still[at]:
            if nxt in ends:
                path = [nxt]
                while at != start:
                    path.append(at)
                    at = parent[at]
                return path[::-1]
            if nxt not in seen:
                seen.add(nxt)
                parent[nxt] = at
                stack.append(nxt)
    return None


def _identity_topological_order(
    hops: Mapping[Location, list[tuple[Location, PathSummary]]],
) -> tuple[Location, ...]:
    """Locations ordered so that every identity step goes forward (the identity graph is a DAG
    once stalling cycles are refused). Processing changes at one time in this order settles each
    location once."""
    indegree: dict[Location, int] = dict.fromkeys(hops, 0)
    for steps in hops.values():
        for nxt, s in steps:
            if not s.advances():
                indegree[nxt] += 1
    ready = sorted(loc for loc, d in indegree.items() if d == 0)
    order: list[Location] = []
    while ready:
        loc = ready.pop(0)
        order.append(loc)
        for nxt, s in hops[loc]:
            if not s.advances():
                indegree[nxt] -= 1
                if indegree[nxt] == 0:
                    ready.append(nxt)
    return tuple(order)
