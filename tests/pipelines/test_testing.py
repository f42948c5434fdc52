"""The test kit users get (``pipelines.testing``), used as a user would."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines import Pipeline, PipelineError
from pipelines.testing import (
    assert_output,
    close_sources,
    rows_of,
    send_epochs,
    send_rows,
    throwaway_runtime,
)

pytestmark = pytest.mark.spark

ORDERS = T.StructType(
    [
        T.StructField("order_id", T.LongType()),
        T.StructField("customer", T.StringType()),
        T.StructField("amount", T.DoubleType()),
    ]
)
TOTALS = T.StructType(
    [T.StructField("customer", T.StringType()), T.StructField("total", T.DoubleType())]
)


def per_customer(df: DataFrame) -> DataFrame:
    return df.groupBy("customer").agg(F.sum("amount").alias("total"))


def running(batch: DataFrame, state: DataFrame) -> DataFrame:
    moved = per_customer(batch).withColumnRenamed("total", "delta")
    joined = moved.join(state, on="customer", how="left")
    return joined.select(
        "customer", (F.coalesce(F.col("total"), F.lit(0.0)) + F.col("delta")).alias("total")
    )


def shop() -> Pipeline:
    p = Pipeline("kit")
    orders = p.source("orders", schema=ORDERS, workers=2, key=["order_id"])
    p.transform("per_customer", orders, fn=per_customer)
    p.stateful("running", orders, key=["customer"], schema=TOTALS, update=running)
    return p


def test_epochs_from_rows_run_and_compare(spark: SparkSession) -> None:
    with throwaway_runtime(shop(), spark) as rt:
        home = rt.ledger.path.parent
        send_epochs(rt, "orders", {0: [(1, "ann", 5.0), (2, "bob", 2.5)], 2: [(3, "ann", 1.0)]})
        send_rows(rt, "orders", [{"order_id": 4, "customer": "bob", "amount": 4.0}], worker=1)
        close_sources(rt)
        rt.run()
        assert_output(rt, "per_customer", 0, [("ann", 5.0), ("bob", 6.5)])
        assert_output(rt, "per_customer", 1, [])  # skipped by worker 0: sealed empty
        assert_output(rt, "running", 2, [{"customer": "ann", "total": 6.0}])
        assert rows_of(rt, "per_customer", 2, columns=["total"]) == [(1.0,)]
        with pytest.raises(AssertionError) as failed:
            assert_output(rt, "per_customer", 0, [("ann", 5.0), ("cid", 1.0)])
        message = str(failed.value)
        assert "stage 'per_customer' epoch 0" in message
        assert "1 expected row(s) missing: [('cid', 1.0)]" in message
        assert "1 row(s) not expected: [('bob', 6.5)]" in message
        with pytest.raises(PipelineError, match="not a source"):
            send_rows(rt, "running", [])
    assert not home.exists()  # a throwaway runtime leaves nothing behind


def test_a_given_home_is_kept(tmp_path: Path, spark: SparkSession) -> None:
    with throwaway_runtime(shop(), spark, home=tmp_path / "kept") as rt:
        send_epochs(rt, "orders", {0: [(1, "ann", 5.0)]}, close=True)
        assert rt.input("orders", 0).epoch is None
    assert (tmp_path / "kept" / "ledger.duckdb").exists()
