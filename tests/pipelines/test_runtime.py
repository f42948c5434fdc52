"""Per-epoch runs on real Spark, checked against DuckDB SQL over the raw inputs."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import types as T

from pipelines.dataflow import Pipeline
from pipelines.errors import StageNotReadyError
from pipelines.testing import close_sources, send_rows, throwaway_runtime
from tests.pipelines.shop import WORKERS, Shop, oracle, rows_of

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
            assert rows_of(rt.read(stage, epoch)) == rows, f"{stage} at epoch {epoch}"
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
