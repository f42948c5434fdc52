"""Iterative stages: rounds to a fixed point inside an epoch, tracked at Product(epoch, round)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pipelines.cli import reports
from pipelines.errors import PipelineDefinitionError, StageFailedError
from pipelines.run import iteration
from pipelines.run.iteration import STEP, Rounds, RoundState
from pipelines.run.runtime import run_key
from pipelines.stages.pipeline import Pipeline
from progress import Product, Target
from progress.ledger import scope_name
from tests.fixtures import chains

pytestmark = [pytest.mark.spark, pytest.mark.slow(41)]

REPO = Path(__file__).resolve().parents[3]
SCOPE = scope_name("chains", "components")


def components(rt: object, epoch: int) -> list[tuple[int, int]]:
    df = rt.read("components", epoch)  # type: ignore[attr-defined]
    return sorted((r.node, r.component) for r in df.collect())


def test_rounds_reach_the_fixed_point_and_equal_the_oracle(
    tmp_path: Path, spark: SparkSession
) -> None:
    seen: list[tuple[int, int, int]] = []
    rt = chains.runtime(tmp_path, spark, on_round=lambda s, e, r, c: seen.append((e, r, c)))
    two_rings = [(10, 11), (11, 12), (20, 21), (7, 7)]
    chains.send(rt, [chains.PATH_OF_SIX, two_rings, []])
    results = {r.epoch: r for r in rt.run()}

    assert results[0].rounds == 6  # five rounds move a label one hop each; the sixth is still
    assert [r for e, r, _ in seen if e == 0] == [0, 1, 2, 3, 4, 5]
    assert [c for e, _, c in seen if e == 0][-1] == 0
    for epoch, links in enumerate([chains.PATH_OF_SIX, two_rings, []]):
        assert components(rt, epoch) == chains.oracle(links)
    assert components(rt, 2) == []

    # Every round went through the ledger, and nothing of the scope is left open.
    tracker = rt.ledger.tracker(SCOPE)
    assert list(tracker.pointstamps()) == []
    for r in range(6):
        history = rt.ledger.history(SCOPE, STEP, Product(0, r))
        assert [m.stage for m in history.messages] == [STEP]
        assert history.batches
    status = {s.stage: s for s in rt.ledger.status("chains")}
    assert status["components"].done == (0, 1, 2)
    assert status["components"].rounds == ()
    assert rt.ledger.pipelines() == ["chains"]  # the scope is not a pipeline of its own
    assert rt.ledger.verify().ok

    # A revision recomputes every round and commits only its output; frontiers stay.
    frontier = rt.ledger.tracker("chains").frontier(Target("components", 0))
    [revised] = rt.revise("components", [0])
    assert (revised.status, revised.rounds) == ("revised", 6)
    assert components(rt, 0) == chains.oracle(chains.PATH_OF_SIX)
    assert rt.ledger.tracker("chains").frontier(Target("components", 0)) == frontier
    assert list(rt.ledger.tracker(SCOPE).pointstamps()) == []
    assert rt.run_stage("components", 0).status == "done-already"


GROUP_KEYS = ("spark.jobGroup.id", "spark.job.description")


@contextmanager
def job_group(spark: SparkSession, group: str) -> Iterator[None]:
    """The Spark jobs this thread runs meanwhile belong to ``group``; then the group before."""
    sc = spark.sparkContext
    saved = {key: sc.getLocalProperty(key) for key in GROUP_KEYS}
    sc.setJobGroup(group, "test_iterate")
    try:
        yield
    finally:
        for key, value in saved.items():
            sc.setLocalProperty(key, value)  # None removes it


def test_a_changing_round_runs_only_the_jobs_of_its_write(
    tmp_path: Path, spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the state changes, a round runs no Spark job besides writing its state (the change
    shows in its row count, or in the checksum its write observed); only the fixed point
    compares rows. Every round reads the epoch's input from Spark's cache, dropped after."""
    tracker = spark.sparkContext.statusTracker()
    run_group = f"test-iterate-{uuid.uuid4().hex}"
    writes: list[str] = []
    inputs: list[tuple[DataFrame, bool]] = []
    write = Rounds._write

    def grouped_write(self: Rounds, df: DataFrame, r: int) -> RoundState:
        writes.append(f"{run_group}-write-{r}")
        with job_group(spark, writes[-1]):
            return write(self, df, r)

    def step(labels: DataFrame, links: DataFrame) -> DataFrame:
        inputs.append((links, links.is_cached))
        return chains.spread(labels, links)

    monkeypatch.setattr(Rounds, "_write", grouped_write)
    rt = chains.runtime(tmp_path, spark, step=step)
    chains.send(rt, [chains.PATH_OF_SIX])
    with job_group(spark, run_group):
        result = rt.run_stage("components", 0)

    assert result.rounds == 6
    assert components(rt, 0) == chains.oracle(chains.PATH_OF_SIX)
    assert len(writes) == 7  # round 0's state from init, and one per round
    assert all(tracker.getJobIdsForGroup(group) for group in writes)
    # Before the writes observed their checksums, the rounds ran 14 more jobs here.
    outside = tracker.getJobIdsForGroup(run_group)
    assert len(outside) <= 2, f"{len(outside)} jobs outside the rounds' writes"
    assert [cached for _, cached in inputs] == [True] * 6
    assert not inputs[0][0].is_cached


def test_rounds_whose_writes_tell_no_checksum_compute_it(
    tmp_path: Path, spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write that hands over no observed checksum (a Spark Connect server may not) leaves the
    rounds to compute it from the files: the same rounds, the same fixed point."""
    monkeypatch.setattr(iteration, "observed", lambda df: (df, lambda: None))
    seen: list[tuple[int, int | None]] = []
    rt = chains.runtime(tmp_path, spark, on_round=lambda s, e, r, c: seen.append((r, c)))
    chains.send(rt, [chains.PATH_OF_SIX])
    [result] = rt.run()
    assert result.rounds == 6
    assert seen == [(0, None), (1, None), (2, None), (3, None), (4, None), (5, 0)]
    assert components(rt, 0) == chains.oracle(chains.PATH_OF_SIX)


def test_a_killed_run_resumes_from_its_last_committed_round(
    tmp_path: Path, spark: SparkSession
) -> None:
    rt = chains.runtime(tmp_path, spark)
    chains.send(rt, [chains.PATH_OF_SIX])
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.fixtures.chains", str(tmp_path), "3"],
        cwd=REPO,
        start_new_session=True,  # its JVM too: the whole group is killed
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert child.stdout is not None
        deadline = time.monotonic() + 180
        line = ""
        while "stalled" not in line:
            line = child.stdout.readline()
            assert line or child.poll() is None, "the run ended before it stalled"
            assert time.monotonic() < deadline, "the run never reached round 3"
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()

    # Rounds 0..2 committed their successors: round 3's state waits, the epoch is not done.
    [status] = [s for s in rt.ledger.status("chains") if s.stage == "components"]
    assert status.rounds == (Product(0, 3),)
    assert status.done == ()
    assert status.ready == (0,)
    assert rt.ledger.committed("chains", run_key("components", 0)) is None
    text = reports.status_table([status])
    assert "components epoch 0 is at round 3" in text
    assert reports.status_json([status])[0]["rounds"] == [[0, 3]]

    seen: list[int] = []
    rt.on_round = lambda s, e, r, c: seen.append(r)
    [result] = rt.run()
    assert seen == [3, 4, 5]  # resumed: rounds 0..2 were not computed again
    assert result.rounds == 3
    assert components(rt, 0) == chains.oracle(chains.PATH_OF_SIX)
    assert list(rt.ledger.tracker(SCOPE).pointstamps()) == []
    assert rt.ledger.tracker("chains").count(Target("components", 0), 0) == 0
    assert rt.ledger.verify().ok


def test_a_stage_without_a_fixed_point_fails_clearly(tmp_path: Path, spark: SparkSession) -> None:
    def drift(labels: DataFrame, links: DataFrame) -> DataFrame:
        return labels.select("node", (F.col("component") + 1).alias("component"))

    rt = chains.runtime(tmp_path / "drift", spark, step=drift, max_rounds=3)
    chains.send(rt, [[(1, 2)]])
    with pytest.raises(StageFailedError, match="no fixed point after 3 rounds") as err:
        rt.run_stage("components", 0)
    assert (err.value.stage, err.value.epoch) == ("components", 0)
    assert rt.ledger.message("chains", "components", 0, 0) == []
    [status] = [s for s in rt.ledger.status("chains") if s.stage == "components"]
    assert status.done == ()
    assert status.rounds == (Product(0, 3),)

    def renamed(labels: DataFrame, links: DataFrame) -> DataFrame:
        return labels.select("node", F.col("component").cast("string").alias("component"))

    rt = chains.runtime(tmp_path / "renamed", spark, step=renamed)
    chains.send(rt, [[(1, 2)]])
    with pytest.raises(StageFailedError, match="column 'component' as string"):
        rt.run_stage("components", 0)


def test_iterate_definition_errors() -> None:
    p = Pipeline("loops")
    links = p.source("links", schema=chains.LINKS)
    with pytest.raises(PipelineDefinitionError, match="max_rounds must be at least 1"):
        p.iterate("x", links, init=chains.start, step=chains.spread, max_rounds=0)
    with pytest.raises(PipelineDefinitionError, match="step must be a function"):
        p.iterate("y", links, init=chains.start, step="spread")  # type: ignore[arg-type]
    with pytest.raises(PipelineDefinitionError, match="unknown input 'nope'"):
        p.iterate("z", "nope", init=chains.start, step=chains.spread)
