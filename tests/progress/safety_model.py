"""A model execution for the safety property (DESIGN.md, invariant 1).

Several actors act on one random dataflow: each worker of each source owns an ``InputHandle``;
executors run stages. Every actor appends progress batches to its own log and keeps a view (a
``Tracker``) that sees its own batches at once and other actors' batches only as they are
delivered, one at a time, in any interleaving of per-actor prefixes. Pure observers see prefixes
too. An executor runs ``(stage, t)`` when *its view* says ready; observers record every ready
answer. At the end, with everything delivered and the execution quiescent, each recorded answer
is checked against the whole execution: whenever a view said ``ready(stage, t)``, it had already
seen every message the execution ever sends to the stage's inputs at any time ``<= t``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hypothesis import assume
from hypothesis import strategies as st

from progress import (
    CycleError,
    Delay,
    Graph,
    GraphBuilder,
    InputHandle,
    PathSummary,
    Product,
    ProductSummary,
    Source,
    Target,
    Time,
    Tracker,
    Update,
    less_equal,
)

TrackerFactory = Callable[[Graph], Tracker]


class SafetyViolationError(AssertionError):
    """A ready answer that the execution proved wrong."""


@dataclass
class Spec:
    graph: Graph
    sources: list[str]
    stages: list[str]
    horizon: int
    product: bool

    def within(self, t: Time) -> bool:
        if isinstance(t, Product):
            return t.outer <= self.horizon and t.inner <= self.horizon  # type: ignore[operator]
        return t <= self.horizon

    def times(self) -> list[Time]:
        h = range(self.horizon + 1)
        if self.product:
            return [Product(o, i) for o in h for i in h]
        return list(h)


Node = tuple[str, int, int, dict[tuple[int, int], list[PathSummary]], int]
"""A node as drawn: name, inputs, outputs, summaries, workers."""


def build(minimum: Time, nodes: list[Node], edges: list[tuple[Source, Target]]) -> Graph:
    builder = GraphBuilder(minimum)
    for name, n_in, n_out, summaries, workers in nodes:
        builder.add_node(name, n_in, n_out, summaries, workers=workers)
    for source, target in edges:
        builder.add_edge(source, target)
    return builder.compile()


def batch_connected(node: Node) -> Node:
    """``node`` as the batch rule sees it: a stage runs every input of an epoch at once, so
    each of its inputs waits for the others and may reach each of its outputs (with any of
    its summaries; a stage with none never emits)."""
    name, n_in, n_out, summaries, workers = node
    every = sorted({s for listed in summaries.values() for s in listed}, key=repr)
    if not every:
        return node
    return name, n_in, n_out, {(i, o): every for i in range(n_in) for o in range(n_out)}, workers


@st.composite
def dataflows(draw: st.DrawFn) -> Spec:
    product = draw(st.booleans())
    minimum: Time = Product(0, 0) if product else 0
    pool: list[PathSummary] = (
        [ProductSummary(0, 0), ProductSummary(0, 0), ProductSummary(0, 1), ProductSummary(1, 0)]
        if product
        else [Delay(0), Delay(0), Delay(1), Delay(2)]
    )
    nodes: list[Node] = []
    edges: list[tuple[Source, Target]] = []
    outputs: list[Source] = []
    sources = [f"s{k}" for k in range(draw(st.integers(1, 2)))]
    for name in sources:
        nodes.append((name, 0, 1, {}, draw(st.integers(1, 3))))
        outputs.append(Source(name, 0))
    stages = [f"n{k}" for k in range(draw(st.integers(1, 5)))]
    inputs: list[Target] = []
    for name in stages:
        n_in, n_out = draw(st.integers(1, 2)), draw(st.integers(1, 2))
        summaries: dict[tuple[int, int], list[PathSummary]] = {}
        for i in range(n_in):
            for o in range(n_out):
                if draw(st.integers(0, 4)):  # one time in five: no path
                    summaries[(i, o)] = draw(
                        st.lists(st.sampled_from(pool), min_size=1, max_size=2)
                    )
        nodes.append((name, n_in, n_out, summaries, draw(st.integers(0, 1))))
        for i in range(n_in):
            target = Target(name, i)
            edges.append((draw(st.sampled_from(outputs)), target))
            inputs.append(target)
        outputs.extend(Source(name, o) for o in range(n_out))
    stage_outputs = [s for s in outputs if s.node not in sources]
    for _ in range(draw(st.integers(0, 2))):  # extra edges: fan-in, and feedback when backwards
        edges.append((draw(st.sampled_from(stage_outputs)), draw(st.sampled_from(inputs))))
    try:
        graph = build(minimum, nodes, edges)
        # In the batch rule's domain (as every pipeline's graph is, each input reaching each
        # output): else two stages may each wait, at one epoch, for the other to run first.
        build(minimum, [batch_connected(n) for n in nodes], edges)
    except CycleError:
        assume(False)
        raise
    return Spec(graph, sources, stages, horizon=3 if product else 6, product=product)


@dataclass
class View:
    tracker: Tracker
    seen: list[int]
    sent: Counter[tuple[Target, Time]] = field(default_factory=Counter)

    def apply(self, batch: list[Update]) -> None:
        self.tracker.apply(batch)
        for location, time, delta in batch:
            if isinstance(location, Target) and delta > 0:
                self.sent[(location, time)] += delta


@dataclass
class Claim:
    stage: str
    time: Time
    seen: dict[tuple[Target, Time], int]
    consumed: dict[Target, int] | None  # set when an executor ran the stage on this claim


class World:
    def __init__(self, spec: Spec, factory: TrackerFactory, executors: list[list[str]]) -> None:
        self.spec = spec
        graph = spec.graph
        self.handles: list[InputHandle | None] = []
        self.owner: list[list[str]] = []
        for name in spec.sources:
            for w in range(graph.node(name).workers):
                self.handles.append(InputHandle(graph, name, w))
                self.owner.append([])
        for stages in executors:
            self.handles.append(None)
            self.owner.append(stages)
        n = len(self.handles)
        self.logs: list[list[list[Update]]] = [[] for _ in range(n)]
        self.views = [self._view(factory, n) for _ in range(n + 2)]  # actors, then 2 observers
        self.truth: Counter[tuple[Target, Time]] = Counter()
        self.claims: list[Claim] = []
        self.runs: Counter[tuple[str, Time]] = Counter()
        for actor, stages in enumerate(self.owner):
            release = [
                (src, graph.minimum, -graph.node(s).workers)
                for s in stages
                if graph.node(s).workers
                for src in graph.node(s).sources()
            ]
            if release:
                self.emit(actor, release)

    def _view(self, factory: TrackerFactory, actors: int) -> View:
        tracker = factory(self.spec.graph)
        tracker.apply(tracker.initial_batch())
        return View(tracker, [0] * actors)

    def emit(self, actor: int, batch: list[Update]) -> None:
        self.logs[actor].append(batch)
        view = self.views[actor]
        view.apply(batch)
        view.seen[actor] += 1
        for location, time, delta in batch:
            if isinstance(location, Target) and delta > 0:
                self.truth[(location, time)] += delta

    def deliver(self, view_index: int, actor: int) -> bool:
        view = self.views[view_index]
        if view.seen[actor] >= len(self.logs[actor]):
            return False
        view.apply(self.logs[actor][view.seen[actor]])
        view.seen[actor] += 1
        return True

    # -- actions -----------------------------------------------------------------------------

    def act_source(self, actor: int, action: str, step: int) -> None:
        handle = self.handles[actor]
        if handle is None or handle.closed:
            return
        if action == "send":
            self.emit(actor, handle.send())
            return
        if action == "advance":
            t = handle.time
            nxt: Time
            if isinstance(t, Product):
                nxt = Product(t.outer + step % 2, t.inner + (step + 1) // 2 % 2 + (step == 0))  # type: ignore[operator]
            else:
                nxt = t + 1 + step % 2
            if self.spec.within(nxt):
                self.emit(actor, handle.advance_to(nxt))
                return
        self.emit(actor, handle.close())

    def runnable(self, actor: int) -> list[tuple[str, Time]]:
        tracker = self.views[actor].tracker
        mine = set(self.owner[actor])
        found = {
            (loc.node, t)
            for loc, t, _ in tracker.pointstamps()
            if isinstance(loc, Target) and loc.node in mine
        }
        return sorted(c for c in found if tracker.ready(*c))  # type: ignore[type-var]

    def run(self, actor: int, stage: str, time: Time) -> None:
        view = self.views[actor]
        claim = self._claim(view, stage, time)
        batch = [u for u in view.tracker.stage_batch(stage, time) if self.spec.within(u[1])]
        claim.consumed = {
            loc: -d for loc, t, d in batch if isinstance(loc, Target) and d < 0 and t == time
        }
        self.runs[(stage, time)] += 1
        self.emit(actor, batch)

    def observe(self, view_index: int) -> None:
        view = self.views[view_index]
        for stage in self.spec.stages:
            for time in self.spec.times():
                if view.tracker.ready(stage, time):
                    self._claim(view, stage, time)

    def _claim(self, view: View, stage: str, time: Time) -> Claim:
        inputs = set(self.spec.graph.node(stage).targets())
        seen = {
            key: n for key, n in view.sent.items() if key[0] in inputs and less_equal(key[1], time)
        }
        claim = Claim(stage, time, seen, None)
        self.claims.append(claim)
        return claim

    def quiesce(self) -> None:
        for actor, handle in enumerate(self.handles):
            if handle is not None and not handle.closed:
                self.emit(actor, handle.close())
        while True:
            for v in range(len(self.views)):
                for a in range(len(self.logs)):
                    while self.deliver(v, a):
                        pass
            ran = False
            for actor in range(len(self.handles)):
                for stage, time in self.runnable(actor):
                    if self.views[actor].tracker.ready(stage, time):
                        self.run(actor, stage, time)
                        ran = True
            if not ran:
                break
        for v in range(len(self.views) - 2, len(self.views)):
            self.observe(v)

    # -- the property ------------------------------------------------------------------------

    def check(self) -> None:
        for claim in self.claims:
            inputs = set(self.spec.graph.node(claim.stage).targets())
            truth = {
                key: n
                for key, n in self.truth.items()
                if key[0] in inputs and less_equal(key[1], claim.time)
            }
            if claim.seen != truth:
                raise SafetyViolationError(
                    f"ready({claim.stage}, {claim.time}) was answered having seen {claim.seen}, "
                    f"but the execution sends {truth}"
                )
            if claim.consumed is not None:
                at_time = {k[0]: n for k, n in truth.items() if k[1] == claim.time}
                if claim.consumed != at_time:
                    raise SafetyViolationError(
                        f"run of ({claim.stage}, {claim.time}) consumed {claim.consumed}, "
                        f"but {at_time} arrive"
                    )
        for (stage, time), count in self.runs.items():
            if count > 1:
                raise SafetyViolationError(f"({stage}, {time}) ran {count} times")
        left = [
            (loc, t, c)
            for loc, t, c in self.views[0].tracker.pointstamps()
            if isinstance(loc, Target)
        ]
        if left:
            raise SafetyViolationError(f"quiescent, yet messages were never consumed: {left}")


def simulate(data: st.DataObject, factory: TrackerFactory) -> World:
    spec = data.draw(dataflows(), label="dataflow")
    n_exec = data.draw(st.integers(1, 2), label="executors")
    executors: list[list[str]] = [[] for _ in range(n_exec)]
    for stage in spec.stages:
        executors[data.draw(st.integers(0, n_exec - 1))].append(stage)
    world = World(spec, factory, executors)
    n_actors = len(world.handles)
    sources = [a for a, h in enumerate(world.handles) if h is not None]
    execs = [a for a, h in enumerate(world.handles) if h is None]
    for _ in range(data.draw(st.integers(0, 120), label="steps")):
        kind = data.draw(st.sampled_from(["source", "run", "deliver", "deliver", "observe"]))
        if kind == "source":
            actor = data.draw(st.sampled_from(sources))
            action = data.draw(st.sampled_from(["send", "send", "advance", "advance", "close"]))
            world.act_source(actor, action, data.draw(st.integers(0, 3)))
        elif kind == "run":
            actor = data.draw(st.sampled_from(execs))
            options = world.runnable(actor)
            if options:
                world.run(actor, *data.draw(st.sampled_from(options)))
        elif kind == "deliver":
            view = data.draw(st.integers(0, len(world.views) - 1))
            actor = data.draw(st.integers(0, n_actors - 1))
            world.deliver(view, actor)
        else:
            world.observe(data.draw(st.sampled_from([n_actors, n_actors + 1])))
    world.quiesce()
    return world


def ignoring_summaries(graph: Graph) -> Tracker:
    """A broken tracker: implications stop at each node (path summaries through it ignored)."""
    tracker = Tracker(graph)
    locations = graph.locations
    tracker._successors = tuple(
        tuple(h for h in hops if not isinstance(locations[i], Target))
        for i, hops in enumerate(graph.successors)
    )
    return tracker


def delaying_everything(graph: Graph) -> Tracker:
    """A broken tracker: every step through a node is taken to delay by one more than it does."""
    tracker = Tracker(graph)
    one: Any = ProductSummary(0, 1) if isinstance(graph.minimum, Product) else Delay(1)
    locations = graph.locations
    tracker._successors = tuple(
        tuple(
            (j, (s or graph.identity).followed_by(one))
            if isinstance(locations[i], Target)
            else (j, s)
            for j, s in hops
        )
        for i, hops in enumerate(graph.successors)
    )
    return tracker


class ReadyAtAnyImpliedTime(Tracker):
    """A broken tracker: takes ``t`` in an input's frontier as harmless, whoever implies it."""

    def ready(self, node: str, time: Time) -> bool:
        for i in self._node_inputs(node):
            for f in self._implications[i].frontier_elements():
                if less_equal(f, time) and f != time:
                    return False
        return True
