"""The planner of per-epoch runs against the tracker's readiness, on random graphs and states.

For random graphs (delays, unions, joins, stateful stages) and random ledger states reached by
sending, advancing and running ready stages: every stage the planner puts in a run is ready when
its turn in that run comes, and no ready stage is left out (neither one ready now nor one the
run itself makes ready).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipelines.run import planning
from pipelines.run.planning import copy_counts, plan_runs
from progress import Delay, GraphBuilder, Source, Target, Time, Tracker
from progress.ledger import StageStatus

pytestmark = pytest.mark.unit

EPOCHS = 3
Planner = Callable[
    [Tracker, list[StageStatus], Mapping[int, set[str]], AbstractSet[str]],
    dict[int, tuple[str, ...]],
]


@dataclass
class World:
    """A random graph and a state of its counts, with what has run."""

    tracker: Tracker
    sources: dict[str, int]
    """Each source's workers."""
    carries: set[str]
    done: dict[str, set[int]]
    stale: dict[str, set[int]]
    in_flight: dict[int, set[str]]

    def statuses(self) -> list[StageStatus]:
        graph = self.tracker.graph
        pending: dict[str, set[Time]] = {}
        for location, t, _ in self.tracker.pointstamps():
            if isinstance(location, Target):
                pending.setdefault(location.node, set()).add(t)
        order = graph.depths()
        out = []
        for name in sorted(graph.nodes, key=lambda n: (order[n], n)):
            is_input = not graph.node(name).inputs
            ready = sorted(t for t in pending.get(name, ()) if self.tracker.ready(name, t))
            out.append(
                StageStatus(
                    "p",
                    name,
                    is_input,
                    (),
                    tuple(sorted(self.done.get(name, ()))),
                    tuple(ready),
                    (),
                    (),
                    stale=tuple(sorted(self.stale.get(name, ()))),
                )
            )
        return out


def build_world(seed: int) -> World:
    rng = random.Random(seed)
    builder = GraphBuilder()
    sources = {f"src{i}": rng.randint(1, 2) for i in range(rng.randint(1, 2))}
    for name, workers in sources.items():
        builder.add_node(name, inputs=0, outputs=1, workers=workers)
    names = list(sources)
    carries: set[str] = set()
    for i in range(rng.randint(2, 7)):
        name = f"s{i}"
        kind = rng.choice(["transform", "transform", "union", "join", "stateful"])
        arity = {"union": rng.randint(2, 3), "join": 2}.get(kind, 1)
        inputs = [rng.choice(names) for _ in range(arity)]
        delay = rng.choice([0, 0, 0, 1]) if kind == "transform" else 0
        summaries = {(port, 0): [Delay(delay)] for port in range(arity)}
        builder.add_node(name, inputs=arity, outputs=1, summaries=summaries, workers=0)
        for port, upstream in enumerate(inputs):
            builder.add_edge(Source(upstream), Target(name, port))
        if kind == "stateful":
            carries.add(name)
        names.append(name)
    tracker = Tracker(builder.compile())
    tracker.apply(tracker.initial_batch())
    world = World(tracker, sources, carries, {}, {}, {})
    at = {(s, w): 0 for s, n in sources.items() for w in range(n)}
    for _ in range(rng.randint(0, 40)):
        action = rng.random()
        if action < 0.5:
            held = [k for k, t in at.items() if t is not None and t < EPOCHS]
            if not held:
                continue
            source, worker = rng.choice(held)
            now = at[(source, worker)]
            assert now is not None
            if rng.random() < 0.6:  # send a message at its epoch
                targets = tracker.graph.edges.get(Source(source), ())
                tracker.apply([(target, now, 1) for target in targets])
            else:  # advance it one epoch
                tracker.apply([(Source(source), now, -1), (Source(source), now + 1, 1)])
                at[(source, worker)] = now + 1
        else:
            runnable = [
                (name, t)
                for location, t, _ in tracker.pointstamps()
                if isinstance(location, Target)
                for name in [location.node]
                if tracker.ready(name, t) and tracker.stage_batch(name, t)
            ]
            if not runnable:
                continue
            name, t = rng.choice(sorted(runnable, key=str))
            tracker.apply(tracker.stage_batch(name, t))
            assert isinstance(t, int)
            world.done.setdefault(name, set()).add(t)
    for name, epochs in world.done.items():
        stale = {t for t in epochs if rng.random() < 0.25}
        if stale:
            world.stale[name] = stale
    if rng.random() < 0.3:
        stages = [n for n in tracker.graph.nodes if tracker.graph.node(n).inputs]
        world.in_flight = {rng.randint(0, EPOCHS): {rng.choice(stages)}}
    return world


def check_plan(world: World, planner: Planner) -> None:
    statuses = world.statuses()
    runs = planner(world.tracker, statuses, world.in_flight, world.carries)
    busy = {s for stages in world.in_flight.values() for s in stages}
    busy |= {s for stages in runs.values() for s in stages if s in world.carries}
    for epoch, stages in runs.items():
        assert len(set(stages)) == len(stages), f"epoch {epoch}: a stage twice in {stages}"
        view = copy_counts(world.tracker)
        for stage in stages:  # each in its turn, as the run executes them
            if epoch in world.done.get(stage, ()):
                continue  # a revision: it was ready when it first ran
            assert view.ready(stage, epoch), f"{stage} is not ready at epoch {epoch} in {stages}"
            batch = view.stage_batch(stage, epoch)
            assert batch, f"{stage} has no message at epoch {epoch} in {stages}"
            view.apply(batch)
        for name, node in view.graph.nodes.items():  # nothing the run makes ready is left out
            if not node.inputs or name in stages or name in world.in_flight.get(epoch, ()):
                continue
            if name in world.carries and name in busy:
                continue
            if epoch in world.done.get(name, ()):
                continue
            left = view.ready(name, epoch) and view.stage_batch(name, epoch)
            assert not left, f"{name} is ready at epoch {epoch} but left out of {stages}"
    for s in statuses:  # nothing ready now is left out
        if s.is_input:
            continue
        wanted = [t for t in s.ready if isinstance(t, int)]
        if s.stage in world.carries:
            if s.stage in {x for v in world.in_flight.values() for x in v}:
                continue
            stale = sorted(world.stale.get(s.stage, ()))
            wanted = stale[:1] if stale else wanted[:1]
        for t in wanted:
            if s.stage in world.in_flight.get(t, ()):
                continue
            assert s.stage in runs.get(t, ()), f"{s.stage} is ready at epoch {t}: not planned"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32))
def test_every_planned_stage_is_ready_at_its_turn_and_none_is_left_out(seed: int) -> None:
    check_plan(build_world(seed), plan_runs)


def test_the_check_catches_a_planner_that_chains_without_asking_ready() -> None:
    """A planner that adds every downstream stage of a run, ready or not, fails the check."""

    def eager(
        tracker: Tracker,
        statuses: list[StageStatus],
        in_flight: Mapping[int, set[str]],
        carries: AbstractSet[str],
    ) -> dict[int, tuple[str, ...]]:
        runs = planning.plan_work(statuses, in_flight, carries)
        graph = tracker.graph
        out = {}
        for epoch, stages in runs.items():
            chained = list(stages)
            for name in sorted(graph.nodes, key=lambda n: graph.depths()[n]):
                ups = planning.upstream_of(graph, name) if graph.node(name).inputs else []
                if name not in chained and any(u in chained for u in ups):
                    chained.append(name)
            out[epoch] = tuple(chained)
        return out

    failures = 0
    for seed in range(200):
        try:
            check_plan(build_world(seed), eager)
        except AssertionError:
            failures += 1
    assert failures > 0
