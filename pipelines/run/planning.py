"""Planning runs, one per epoch: which stages a run at an epoch executes, upstream first.

Readiness has one rule, the ``Tracker``'s. A run starts from the stages that are ready or stale
now, and takes in every stage downstream that the run itself makes ready: the planner applies
the batches of the run's stages to a copy of the counts, in order, and asks ``ready`` of each
candidate, exactly as the run will when the stage's turn comes (``Executor.admit``). Running
other ready work never takes readiness away (what it consumes could only have held a stage
back, and what it produces is implied by what it consumed), so each epoch's run is planned
on its own.

A done stage that reads, undelayed, a stage the run revises will be stale after it: it is in
the run too, except a stage that holds state (it is revised on its own, from its earliest stale
epoch, which recomputes every later one). A stage that holds state is in one run at a time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet

from progress import Delay, Graph, Target, Tracker
from progress.ledger import StageStatus


def plan_work(
    statuses: Sequence[StageStatus],
    in_flight: Mapping[int, set[str]],
    carries: AbstractSet[str] = frozenset(),
) -> dict[int, tuple[str, ...]]:
    """Per epoch, the stages to run there, in the status order (upstream first): those ready or
    stale, except stages already in flight at that epoch and those whose last run there failed
    with no input changed since (it would fail the same way).

    A stage in ``carries`` keeps state from epoch to epoch, so it gets one epoch at a time, and
    none while a run of it is in flight: its earliest stale epoch (revising it recomputes every
    later one from the state before it), else its ready epoch.

    >>> from progress.ledger import StageStatus
    >>> balances = StageStatus("bank", "balances", False, (2,), (0, 1), (2,), (), (), stale=(0, 1))
    >>> plan_work([balances], {}, {"balances"})
    {0: ('balances',)}
    >>> plan_work([balances], {}, set())
    {2: ('balances',), 0: ('balances',), 1: ('balances',)}
    """
    busy = {stage for stages in in_flight.values() for stage in stages}
    out: dict[int, list[str]] = {}
    for s in statuses:
        if s.is_input:
            continue
        failed = {f.time for f in s.failed if not f.input_changed}  # would fail again
        epochs = [t for t in (*s.ready, *s.stale) if isinstance(t, int) and t not in failed]
        if s.stage in carries:
            if s.stage in busy:
                continue
            stale = [t for t in s.stale if isinstance(t, int)]
            epochs = [min(stale)] if stale else epochs[:1]
        for t in epochs:
            if s.stage in in_flight.get(t, set()):
                continue
            stages = out.setdefault(t, [])
            if s.stage not in stages:
                stages.append(s.stage)
    return {t: tuple(stages) for t, stages in out.items()}


def plan_runs(
    tracker: Tracker,
    statuses: Sequence[StageStatus],
    in_flight: Mapping[int, set[str]],
    carries: AbstractSet[str] = frozenset(),
) -> dict[int, tuple[str, ...]]:
    """Per epoch, the stages of its run: ``plan_work``'s, and the stages downstream that the
    run makes ready or stale (``chain``), in the order the run executes them.

    >>> from progress import GraphBuilder, Source
    >>> b = GraphBuilder()
    >>> b.add_node("events", inputs=0, outputs=1)
    >>> for name, upstream in (("clean", "events"), ("daily", "clean")):
    ...     b.add_node(name, inputs=1, outputs=1, workers=0)
    ...     b.add_edge(Source(upstream), Target(name))
    >>> tracker = Tracker(b.compile())
    >>> sent_and_closed = [(Target("clean"), 0, 1), (Source("events"), 0, -1)]
    >>> tracker.apply(tracker.initial_batch() + sent_and_closed)
    >>> clean = StageStatus("p", "clean", False, (0,), (), (0,), (), ())
    >>> daily = StageStatus("p", "daily", False, (0,), (), (), (), ())
    >>> plan_runs(tracker, [clean, daily], {})
    {0: ('clean', 'daily')}
    """
    seeds = plan_work(statuses, in_flight, carries)
    return chain(tracker, statuses, seeds, in_flight, carries)


def chain(
    tracker: Tracker,
    statuses: Sequence[StageStatus],
    seeds: Mapping[int, tuple[str, ...]],
    in_flight: Mapping[int, set[str]],
    carries: AbstractSet[str] = frozenset(),
) -> dict[int, tuple[str, ...]]:
    """Each epoch's ``seeds`` (what ``plan_work`` planned there), followed by the stages
    downstream that running them makes ready or stale (see the module docs)."""
    graph = tracker.graph
    order = graph.depths()
    busy = {stage for stages in in_flight.values() for stage in stages}
    busy |= {stage for stages in seeds.values() for stage in stages if stage in carries}
    done = {s.stage: set(s.done) for s in statuses}
    candidates = sorted(
        (name for name, node in graph.nodes.items() if node.inputs),
        key=lambda name: (order[name], name),
    )
    runs: dict[int, tuple[str, ...]] = {}
    for epoch, seeded in seeds.items():
        view = copy_counts(tracker)
        stages = list(seeded)
        for stage in stages:
            view.apply(view.stage_batch(stage, epoch))
        for name in candidates:
            if name in stages or name in in_flight.get(epoch, set()):
                continue
            if name in carries and name in busy:
                continue
            if epoch in done.get(name, ()):
                follows = name not in carries and any(
                    u in stages and undelayed(graph, u) for u in upstream_of(graph, name)
                )
            else:
                batch = view.stage_batch(name, epoch) if view.ready(name, epoch) else []
                view.apply(batch)
                follows = bool(batch)
            if follows:
                stages.append(name)
        runs[epoch] = tuple(stages)
    return runs


def copy_counts(tracker: Tracker) -> Tracker:
    """A tracker of the same graph with the same positive counts (a ledger's counts are never
    negative: its batches are applied whole, in commit order)."""
    view = Tracker(tracker.graph)
    view.apply(tracker.pointstamps())
    return view


def upstream_of(graph: Graph, stage: str) -> list[str]:
    """The stages whose output ``stage`` reads, in port order."""
    return [
        source.node
        for port in range(graph.node(stage).inputs)
        for source, targets in graph.edges.items()
        if Target(stage, port) in targets
    ]


def undelayed(graph: Graph, stage: str) -> bool:
    """Whether ``stage``'s run at an epoch announces its output at that same epoch."""
    summaries = graph.node(stage).summaries.get((0, 0), ())
    return any(isinstance(s, Delay) and s.k == 0 for s in summaries)
