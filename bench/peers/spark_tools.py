"""The workloads as an epochgate user writes them (a ``Pipeline`` and a ``Runtime``, the same
code on local Spark and on Sail: the session decides) and as a plain PySpark script does (each
epoch once all of its files are there, one session)."""

from __future__ import annotations

import time
from pathlib import Path

import duckdb
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from peers.record import Recorder
from peers.workloads import COLUMNS, Feed
from pipelines import Pipeline, Runtime
from pipelines.results import RunResult
from progress.ledger import Ledger

MOVES = T.StructType(
    [T.StructField("account", T.LongType()), T.StructField("amount", T.LongType())]
)
ORDERS = T.StructType(
    [
        T.StructField("order_id", T.LongType()),
        T.StructField("customer", T.LongType()),
        T.StructField("cents", T.LongType()),
    ]
)
PAYMENTS = T.StructType(
    [
        T.StructField("order_id", T.LongType()),
        T.StructField("customer", T.LongType()),
        T.StructField("paid", T.LongType()),
    ]
)
SCHEMAS = {"moves": MOVES, "orders": ORDERS, "payments": PAYMENTS}


def per_customer(joined: DataFrame) -> DataFrame:
    """The join workload's totals per customer (one function for both Spark sides)."""
    return joined.groupBy("customer").agg(
        F.count(F.lit(1)).alias("n"), F.sum("cents").alias("cents"), F.sum("paid").alias("paid")
    )


# -- epochgate -------------------------------------------------------------------------------


EXPORT = "export"
"""The sink that publishes the result: an epoch's output is out once it has published it."""


def pipeline(workload: str) -> Pipeline:
    """The workload's pipeline: its result published by the ``EXPORT`` sink."""
    if workload == "sum":
        p = Pipeline("peers_sum")
        moves = p.source("moves", schema=MOVES, workers=2)
        p.aggregate("totals", moves, key=["account"], aggs={"total": ("sum", "amount")})
        p.sink(EXPORT, "totals", path="export")
        return p
    p = Pipeline("peers_join")
    orders = p.source("orders", schema=ORDERS)
    payments = p.source("payments", schema=PAYMENTS, workers=2)
    # The join is not written: per_customer joins and sums in one Spark job, as plain does.
    paid = p.join("paid", orders, payments, on=["order_id", "customer"], materialize=False)
    p.transform("per_customer", paid, fn=per_customer)
    p.sink(EXPORT, "per_customer", path="export")
    return p


def run_epochgate(feed: Feed, spark: SparkSession, home: Path, rec: Recorder) -> Path:
    p = pipeline(feed.workload)
    rt = Runtime(p, Ledger(home / "ledger.duckdb"), spark, home / "data")

    def on_result(r: RunResult) -> None:
        rec.spent(f"stage {r.stage}", r.seconds)
        if r.stage == EXPORT:
            rec.emitted(int(r.epoch))  # type: ignore[arg-type]

    rec.start()
    for step in feed.steps:
        rec.delivered()  # the file is handed over: what the send does is epochgate's time
        started = time.perf_counter()
        # The worker's one file of the epoch, and the epoch complete for it: one commit.
        rt.input(step.source, step.worker).send(step.path, advance_to=step.epoch + 1)
        sent = time.perf_counter()
        rec.spent("send and advance", sent - started)
        rt.run(on_result=on_result)
        rec.spent("run", time.perf_counter() - sent)
    rec.stop()
    out = home / "output.parquet"
    cols = ", ".join(COLUMNS[feed.workload])
    exported = f"{rt.sink_path(EXPORT)}/*/*.parquet"
    duckdb.sql(
        f"COPY (SELECT {cols} FROM read_parquet('{exported}', hive_partitioning = true)) "
        f"TO '{out}' (FORMAT parquet)"
    )
    return out


# -- plain PySpark ---------------------------------------------------------------------------


STATE = T.StructType([T.StructField("account", T.LongType()), T.StructField("total", T.LongType())])


def run_plain(feed: Feed, spark: SparkSession, home: Path, rec: Recorder) -> Path:
    """After each file, run every epoch whose files have all arrived (in epoch order). The
    running sum keeps its state as a Parquet table per epoch, ``moved=true`` the accounts the
    epoch moved (its output) and ``moved=false`` the others: one Spark job an epoch (the
    previous table, full outer join the epoch's sums, written partitioned)."""
    arrived: dict[int, int] = {}
    expected = sum(feed.workers.values())
    done = -1
    outputs = home / "out"

    def read(source: str, epoch: int) -> DataFrame:
        files = [str(f) for f in feed.files(source, epoch)]
        return spark.read.schema(SCHEMAS[source]).parquet(*files)

    def run_epoch(epoch: int) -> None:
        target = str(outputs / f"epoch={epoch}")
        if feed.workload == "join":
            joined = read("orders", epoch).join(read("payments", epoch), ["order_id", "customer"])
            per_customer(joined).write.parquet(target)
            return
        delta = read("moves", epoch).groupBy("account").agg(F.sum("amount").alias("delta"))
        if epoch == 0:
            state = spark.createDataFrame([], STATE)
        else:
            state = spark.read.schema(STATE).parquet(str(outputs / f"epoch={epoch - 1}"))
        new = state.join(delta, "account", "full").select(
            "account",
            (F.coalesce(F.col("total"), F.lit(0)) + F.coalesce(F.col("delta"), F.lit(0))).alias(
                "total"
            ),
            F.col("delta").isNotNull().alias("moved"),
        )
        new.write.partitionBy("moved").parquet(target)

    rec.start()
    for step in feed.steps:
        arrived[step.epoch] = arrived.get(step.epoch, 0) + 1
        rec.delivered()
        while arrived.get(done + 1, 0) == expected:
            done += 1
            run_epoch(done)
            rec.emitted(done)
    rec.stop()
    out = home / "output.parquet"
    cols = ", ".join(COLUMNS[feed.workload])
    files = f"{outputs}/*/*.parquet" if feed.workload == "join" else f"{outputs}/*/*/*.parquet"
    moved = "" if feed.workload == "join" else " WHERE moved"
    duckdb.sql(
        f"COPY (SELECT {cols} FROM read_parquet('{files}', hive_partitioning = true){moved}) "
        f"TO '{out}' (FORMAT parquet)"
    )
    return out
