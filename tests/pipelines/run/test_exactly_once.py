"""Exactly once: any schedule of sends, advances, runs, repeated runs, revisions and late data
ends, after quiescence, with every output equal to a from-scratch run over the same inputs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from pipelines.run.executor import Executor
from pipelines.run.runtime import Runtime
from pipelines.stages.pipeline import Pipeline
from progress import Time
from progress.ledger import Ledger, MessageRef
from tests.fixtures.shop import WORKERS, Shop, oracle, published, rows_of

pytestmark = pytest.mark.spark

EPOCHS = 3
STAGES = ("valid_orders", "refunds_negated", "movements", "by_category", "by_region")
Action = tuple[str, int, int]


class EveryAttempt(Executor):
    """A broken executor: it also reads replaced attempts, so a revision is counted twice."""

    def resolve(self, upstream: str, epoch: Time) -> tuple[list[MessageRef], list[str]]:
        refs, _ = super().resolve(upstream, epoch)
        history = self.ledger.history(self.pipeline.name, upstream, epoch).messages
        return refs, [m.path for m in history if m.path and m.port == 0]


def reads_every_attempt(
    pipeline: Pipeline, ledger: Ledger, spark: SparkSession, data: Path
) -> Runtime:
    """A runtime whose runs go through the broken executor."""
    rt = Runtime(pipeline, ledger, spark, data)
    rt.executor = EveryAttempt(pipeline, ledger, spark, rt.store, rt.state)
    return rt


def play(shop_: Shop, actions: list[Action]) -> None:
    rt = shop_.rt
    sources = list(WORKERS)
    for kind, a, b in actions:
        source = sources[a % len(sources)]
        worker = b % WORKERS[source]
        handle = rt.input(source, worker)
        epoch = handle.epoch
        if kind == "send" and epoch is not None and epoch < EPOCHS:
            shop_.send(source, worker, epoch, part=len(shop_.files.get(source, {}).get(epoch, [])))
        elif kind == "advance" and epoch is not None and epoch < EPOCHS:
            handle.advance_to(epoch + 1)
        elif kind == "run":
            ready = rt.ready()
            if ready:
                rt.run_stage(*ready[a % len(ready)])
        elif kind == "rerun":
            stage = STAGES[a % len(STAGES)]
            done = rt.ledger.done_epochs("shop", stage)
            if done:
                assert rt.run_stage(stage, done[b % len(done)]).status == "done-already"
        elif kind == "revise":
            stage = STAGES[a % len(STAGES)]
            done = rt.ledger.done_epochs("shop", stage)
            if done:
                rt.revise(stage, [done[b % len(done)]])
    for source, workers in WORKERS.items():
        for w in range(workers):
            handle = rt.input(source, w)
            if handle.epoch is not None:
                handle.advance_to(EPOCHS)
                handle.close()
    rt.run()


def mismatches(shop_: Shop) -> list[str]:
    bad = []
    for epoch in range(EPOCHS + 2):
        for stage, rows in oracle(shop_.files, epoch).items():
            if epoch >= EPOCHS and stage != "settled":
                continue
            if rows_of(shop_.rt.read_arrow(stage, epoch)) != rows:
                bad.append(f"{stage} epoch {epoch}")
    exported = published(shop_.sink)
    for epoch in range(EPOCHS):  # the sink's path shows each epoch's by_category, once
        if exported.get(epoch, []) != oracle(shop_.files, epoch)["by_category"]:
            bad.append(f"export epoch {epoch} as published")
    return bad


def fresh(tmp: Path, spark: SparkSession, runtime: Callable[..., Runtime] = Runtime) -> Shop:
    shop_ = Shop(tmp, spark)
    shop_.rt = runtime(shop_.rt.pipeline, shop_.ledger, spark, tmp / "data")
    return shop_


actions = st.lists(
    st.tuples(
        st.sampled_from(["send", "send", "advance", "advance", "run", "run", "rerun", "revise"]),
        st.integers(0, 7),
        st.integers(0, 7),
    ),
    min_size=5,
    max_size=30,
)


@settings(
    max_examples=4,
    deadline=None,
    derandomize=True,
    database=None,
    phases=[Phase.generate],  # shrinking would re-run Spark many times over
    suppress_health_check=list(HealthCheck),
)
@given(actions)
def test_any_schedule_counts_each_input_once(
    tmp_path_factory: pytest.TempPathFactory, spark: SparkSession, schedule: list[Action]
) -> None:
    shop_ = fresh(tmp_path_factory.mktemp("schedule"), spark)
    play(shop_, schedule)
    assert mismatches(shop_) == []
    assert shop_.rt.stale() == []
    assert shop_.ledger.verify().ok


SCHEDULE: list[Action] = [
    ("send", 0, 0), ("send", 1, 0), ("send", 2, 0), ("advance", 0, 0), ("advance", 0, 1),
    ("advance", 1, 0), ("advance", 2, 0), ("run", 0, 0), ("run", 0, 0), ("run", 0, 0),
    ("run", 0, 0), ("revise", 0, 0), ("send", 0, 1),
]  # fmt: skip


def test_the_check_catches_double_counting(tmp_path: Path, spark: SparkSession) -> None:
    good = fresh(tmp_path / "good", spark)
    play(good, SCHEDULE)
    assert mismatches(good) == []
    broken = fresh(tmp_path / "broken", spark, reads_every_attempt)
    play(broken, SCHEDULE)
    assert mismatches(broken) != []
