"""Reads against time: an epoch not done yet (refused naming its holder, or waited for while
another runtime runs it), and a view added to a pipeline with history (a partial one answers at
once; a full one added from the start answers once it has run every past epoch).

Every expected row comes from ``Oracle`` (DuckDB SQL over the raw input files).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from pipelines import Pipeline
from pipelines.errors import StageNotReadyError
from pipelines.reads.lookup import KeyedReads
from pipelines.run.runtime import Runtime
from pipelines.stages.kinds import KeyedStage
from progress.ledger import Ledger
from tests.fixtures.partials import AGGS, MOVES, Raw, ledger_pipeline, writes

pytestmark = pytest.mark.spark

HOLDER = "source moves, worker 1, still holds epoch 3"


def looks_before(monkeypatch: pytest.MonkeyPatch, epoch: int) -> threading.Event:
    """An event set once a read of this thread (the main one) has looked at the ledger and
    found its stage's last epoch before ``epoch``: from then on, it waits for it."""
    found = threading.Event()
    real = KeyedReads.last_epoch
    reader = threading.current_thread()

    def last_epoch(reads: KeyedReads, spec: KeyedStage) -> int | None:
        last = real(reads, spec)
        if threading.current_thread() is reader and (last is None or last < epoch):
            found.set()
        return last

    monkeypatch.setattr(KeyedReads, "last_epoch", last_epoch)
    return found


def test_a_read_of_an_epoch_not_done_names_its_holder_or_waits_for_it(
    tmp_path: Path, spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = Ledger(tmp_path / "ledger.duckdb")
    rt = Runtime(ledger_pipeline(workers=2), ledger, spark, tmp_path / "data")
    raw = Raw(rt, tmp_path / "raw")
    raw.epochs("moves", {0: writes(0, 1), 1: writes(1, 2), 2: [], 3: writes(3, 1, 2)})
    raw.epochs("moves", {0: writes(0, 2), 1: [], 2: writes(2, 1)}, worker=1)  # holds epoch 3
    rt.run()
    for stage in ("balances", "totals"):
        with pytest.raises(StageNotReadyError, match=HOLDER) as err:
            rt.lookup(stage, [1], as_of=3)
        assert (err.value.stage, err.value.epoch) == (stage, 3)
    started = time.monotonic()
    with pytest.raises(StageNotReadyError, match=HOLDER):
        rt.lookup("totals", [1, 2], as_of=3, wait=1.0)
    assert time.monotonic() - started >= 1.0
    assert rt.state_info("totals").misses == 0  # nothing was filled
    done = rt.lookup("totals", [1], as_of=2)  # an epoch done answers at once
    assert (done.as_of, done.rows) == (2, raw.oracle().totals(2, [1]))

    other = Runtime(ledger_pipeline(workers=2), ledger, spark, tmp_path / "data")
    failures: list[BaseException] = []
    waiting = looks_before(monkeypatch, 3)

    def release() -> None:  # another runtime of the pipeline closes epoch 3 and runs it
        try:
            assert waiting.wait(60), "the read never looked for epoch 3"
            late = Raw(other, tmp_path / "late")
            late.send("moves", 3, writes(3, 1, amount=5), worker=1)
            other.input("moves", 1).close()
            other.run()
            raw.files.update(late.files)
        except BaseException as exc:
            failures.append(exc)

    thread = threading.Thread(target=release)
    thread.start()
    read = rt.lookup("totals", [1, 2], as_of=3, wait=300)
    thread.join()
    assert failures == []
    assert read.as_of == 3
    assert read.rows == raw.oracle().totals(3, [1, 2])


def test_a_partial_view_added_to_a_pipeline_with_history_answers_at_once(
    tmp_path: Path, spark: SparkSession
) -> None:
    ledger = Ledger(tmp_path / "ledger.duckdb")
    first = Pipeline("ledger")
    first.source("moves", schema=MOVES)
    first.aggregate("counts", "moves", key=["account"], aggs={"n": ("count", None)})
    rt = Runtime(first, ledger, spark, tmp_path / "data")
    raw = Raw(rt, tmp_path / "raw")
    raw.epochs("moves", {0: writes(0, 1, 2), 1: writes(1, 1), 2: [*writes(2, 2, 3), (1, -1, -1)]})
    rt.run()
    oracle = raw.oracle()

    def with_view(full: bool) -> Pipeline:
        p = Pipeline("ledger")
        p.source("moves", schema=MOVES)
        p.aggregate("counts", "moves", key=["account"], aggs={"n": ("count", None)})
        p.aggregate("view", "moves", key=["account"], aggs=AGGS, partial=True)
        if full:
            p.aggregate("full_view", "moves", key=["account"], aggs=AGGS)
        return p

    viewed = Runtime(with_view(False), ledger, spark, tmp_path / "data")
    read = viewed.lookup("view", [1, 2, 3])
    assert (read.as_of, read.upqueried) == (2, [1, 2, 3])
    assert read.rows == oracle.totals(2, [1, 2, 3])
    assert viewed.lookup("view", [3], as_of=1).rows == oracle.totals(1, [3])
    assert viewed.ledger.done_epochs("ledger", "view") == []  # no epoch was run for it
    raw.rt = viewed
    raw.epochs("moves", {3: writes(3, 1, 3)})
    viewed.run()
    oracle = raw.oracle()
    after = viewed.lookup("view", [1, 2, 3])
    assert (after.hits, after.rows) == ([1, 2, 3], oracle.totals(3, [1, 2, 3]))
    assert viewed.ledger.done_epochs("ledger", "view") == [3]

    backfilled = Runtime(with_view(True), ledger, spark, tmp_path / "data", from_start=True)
    with pytest.raises(StageNotReadyError, match="full_view"):
        backfilled.lookup("full_view", [1])
    backfilled.run()
    assert sorted(ledger.done_epochs("ledger", "full_view")) == [0, 1, 2, 3]
    full = backfilled.lookup("full_view", [1, 2, 3])
    assert (full.hits, full.rows) == ([1, 2, 3], oracle.totals(3, [1, 2, 3]))
    assert backfilled.lookup("full_view", [3], as_of=1).rows == oracle.totals(1, [3])
