"""Per-epoch runs on real Spark, checked against DuckDB SQL over the raw inputs."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import types as T

from pipelines.errors import RunFailedError, StageNotReadyError
from pipelines.run.runtime import RunResult, Runtime
from pipelines.stages.pipeline import Pipeline
from pipelines.testing import close_sources, send_epochs, send_rows, throwaway_runtime
from progress import Time
from progress.ledger import Ledger
from state_store import KeyedState
from tests.fixtures import branches
from tests.fixtures.shop import WORKERS, Shop, oracle, rows_of

pytestmark = pytest.mark.spark


def test_every_stage_matches_the_oracle_with_late_data(tmp_path: Path, spark: SparkSession) -> None:
    shop_ = Shop(tmp_path, spark)
    rt = shop_.rt
    for epoch in range(3):
        for source, workers in WORKERS.items():
            for w in range(workers):
                if source == "orders" and w == 1 and epoch > 0:
                    continue  # worker 1 of orders holds epoch 1 open
                shop_.send(source, w, epoch)
                rt.input(source, w).advance_to(epoch + 1)
    rt.run()
    holds = [h.text for h in shop_.ledger.blockers("shop", "valid_orders", 1)]
    assert holds == ["source orders, worker 1, still holds epoch 1"]
    with pytest.raises(StageNotReadyError, match="source orders, worker 1, still holds epoch 1"):
        rt.run_stage("movements", 1)
    status = {s.stage: s for s in shop_.ledger.status("shop")}
    assert status["refunds_negated"].done == (0, 1, 2)  # not held back: no path from orders
    assert status["movements"].done == (0,)
    assert status["movements"].waiting == (1, 2)

    shop_.send("orders", 1, 1)  # late data, twice, for the epoch still held
    shop_.send("orders", 1, 1, part=1)
    rt.input("orders", 1).advance_to(3)  # seals epoch 2 for this worker (no data)
    for source, workers in WORKERS.items():
        for w in range(workers):
            rt.input(source, w).close()
    rt.run()
    assert rt.ready() == []
    assert rt.pending() == []

    for epoch in range(5):
        expected = oracle(shop_.files, epoch)
        for stage, rows in expected.items():
            if stage != "settled" and epoch > 2:
                continue
            assert rows_of(rt.read_arrow(stage, epoch)) == rows, f"{stage} at epoch {epoch}"
    exported = rows_of(spark.read.parquet(str(shop_.sink / "epoch=1")))
    assert exported == oracle(shop_.files, 1)["by_category"]
    assert rt.run_stage("by_category", 0).status == "done-already"
    status = {s.stage: s for s in shop_.ledger.status("shop")}
    assert status["settled"].done == (0, 1, 2)
    assert status["by_region"].done == (0, 1, 2)
    assert shop_.ledger.verify().ok


def test_a_union_catalogs_its_inputs_files_and_writes_only_when_columns_differ(
    tmp_path: Path, spark: SparkSession
) -> None:
    ab = T.StructType([T.StructField("a", T.LongType()), T.StructField("b", T.StringType())])
    ba = T.StructType([T.StructField("b", T.StringType()), T.StructField("a", T.LongType())])
    p = Pipeline("unions")
    left, same, swapped = (
        p.source("left", schema=ab),
        p.source("same", schema=ab),
        p.source("swapped", schema=ba),
    )
    p.union("shared", left, same)
    p.union("mixed", left, swapped)
    with throwaway_runtime(p, spark, home=tmp_path) as rt:
        send_rows(rt, "left", [(1, "x")])
        send_rows(rt, "same", [(2, "y"), (3, "z")])
        send_rows(rt, "swapped", [("w", 4)])
        close_sources(rt)
        results = {r.stage: r for r in rt.run()}
        assert results["shared"].rows == 3
        assert sorted(tuple(r) for r in rt.read("shared", 0).collect()) == [
            (1, "x"),
            (2, "y"),
            (3, "z"),
        ]
        assert sorted(tuple(r) for r in rt.read("mixed", 0).select("a", "b").collect()) == [
            (1, "x"),
            (4, "w"),
        ]
        inputs = {m.path for s in ("left", "same") for m in rt.ledger.message("unions", s, 0, 0)}
        assert {m.path for m in rt.ledger.message("unions", "shared", 0, 0)} == inputs
        read = {(r.stage, r.attempt) for r in rt.ledger.reads("unions", "shared", 0)}
        assert read == {
            (s, m.attempt) for s in ("left", "same") for m in rt.ledger.message("unions", s, 0, 0)
        }
        assert not (tmp_path / "data" / "unions" / "shared").exists()  # nothing copied
        assert (tmp_path / "data" / "unions" / "mixed").exists()  # columns differ: written
        assert rt.collect_garbage(older_than=0) == []  # the shared files stay: they are read
        assert rt.read("shared", 0).count() == 3


def test_a_failing_stage_does_not_starve_the_independent_ones(
    tmp_path: Path, spark: SparkSession
) -> None:
    rt = Runtime(branches.broken(), Ledger(tmp_path / "ledger.duckdb"), spark, tmp_path / "data")
    send_epochs(rt, "events", branches.ROWS, close=True)
    other = KeyedState(rt.state.path)  # another holder of the stateful stage's writer lock
    free: list[tuple[str, Time]] = []

    def heard(result: RunResult) -> None:
        if result.epoch != 0:  # kind_counts failed at epoch 0, before any later epoch ran
            with other.writer("branches", "kind_counts", timeout=2):
                free.append((result.stage, result.epoch))

    with pytest.raises(RunFailedError) as err:
        rt.run(heard)
    [failure] = err.value.failures
    assert (failure.stage, failure.epoch) == ("kind_counts", 0)
    assert "the kinds service is down" in failure.cause
    assert "stage 'kind_counts', epoch 0 failed: the kinds service is down" in str(err.value)
    ran = sorted((r.stage, r.epoch) for r in err.value.results)
    assert ran == sorted((s, e) for s in ("big", "big_by_kind") for e in branches.EPOCHS)
    assert len(free) == 4  # the lock was released at the failure, not at the end of run()
    for epoch in branches.EPOCHS:
        expected = branches.oracle(epoch)["big_by_kind"]
        assert sorted(rows_of(rt.read_arrow("big_by_kind", epoch))) == expected
    status = {s.stage: s for s in rt.ledger.status("branches")}
    assert status["kind_counts"].done == ()
    assert status["busy_kinds"].done == ()

    fixed = Runtime(branches.pipeline(), rt.ledger, spark, tmp_path / "data")
    results = fixed.run()
    finished = sorted((r.stage, r.epoch, r.status) for r in results)
    assert finished == sorted(
        (s, e, "succeeded") for s in ("kind_counts", "busy_kinds") for e in branches.EPOCHS
    )
    assert fixed.run() == []
    for epoch in branches.EPOCHS:
        expected = branches.oracle(epoch)
        for stage in ("kind_counts", "busy_kinds"):
            got = rows_of(fixed.read_arrow(stage, epoch))
            assert sorted(got) == expected[stage], (stage, epoch)
    runs = rt.ledger.history("branches", "kind_counts", 0).runs
    assert [r.status for r in runs] == ["failed", "succeeded"]
    assert rt.ledger.verify().ok


def test_a_run_names_the_stage_epoch_and_column_a_function_output_lacks(
    tmp_path: Path, spark: SparkSession
) -> None:
    events = T.StructType([T.StructField("id", T.LongType()), T.StructField("v", T.StringType())])
    p = Pipeline("lacks")
    src = p.source("events", schema=events)
    values = p.transform("values", src, fn=lambda df: df.select("v"))  # drops id
    p.join("joined", values, src, on=["id"])  # values' columns are known only when it runs
    p.stateful("kept", values, key=["id"], schema=events, update=lambda batch, state: batch)
    with throwaway_runtime(p, spark, home=tmp_path) as rt:
        send_rows(rt, "events", [(1, "a")])
        close_sources(rt)
        with pytest.raises(RunFailedError) as err:
            rt.run()
        failures = {f.stage: f for f in err.value.failures}
        assert set(failures) == {"joined", "kept"}
        joined = failures["joined"]
        assert (joined.epoch, joined.column) == (0, "id")
        assert "join column 'id' (on=['id']) is not in the left input 'values'" in str(joined)
        assert (failures["kept"].epoch, failures["kept"].column) == (0, "id")
        assert [(r.stage, r.epoch) for r in err.value.results] == [("values", 0)]
        assert rt.ledger.message("lacks", "joined", 0, 0) == []
