"""The workloads as an epochgate user writes them (a ``Pipeline`` and a ``Runtime``, the same
code on local Spark and on Sail: the session decides) and as a plain PySpark script does (each
epoch once all of its files are there, one session)."""

from __future__ import annotations

import shutil
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


def pipeline(workload: str) -> tuple[Pipeline, str]:
    """The workload's pipeline and the stage whose output is the result."""
    if workload == "sum":
        p = Pipeline("peers_sum")
        moves = p.source("moves", schema=MOVES, workers=2)
        p.aggregate("totals", moves, key=["account"], aggs={"total": ("sum", "amount")})
        p.sink("export", "totals", path="export")
        return p, "totals"
    p = Pipeline("peers_join")
    orders = p.source("orders", schema=ORDERS)
    payments = p.source("payments", schema=PAYMENTS, workers=2)
    # The join is not written: per_customer joins and sums in one Spark job, as plain does.
    paid = p.join("paid", orders, payments, on=["order_id", "customer"], materialize=False)
    p.transform("per_customer", paid, fn=per_customer)
    p.sink("export", "per_customer", path="export")
    return p, "per_customer"


def run_epochgate(feed: Feed, spark: SparkSession, home: Path, rec: Recorder) -> Path:
    p, result = pipeline(feed.workload)
    rt = Runtime(p, Ledger(home / "ledger.duckdb"), spark, home / "data")

    def on_result(r: RunResult) -> None:
        rec.spent(f"stage {r.stage}", r.seconds)
        if r.stage == result:
            rec.emitted(int(r.epoch))  # type: ignore[arg-type]

    rec.start()
    for step in feed.steps:
        started = time.perf_counter()
        # The worker's one file of the epoch, and the epoch complete for it: one commit.
        rt.input(step.source, step.worker).send(step.path, advance_to=step.epoch + 1)
        sent = time.perf_counter()
        rec.spent("send and advance", sent - started)
        rec.delivered()
        rt.run(on_result=on_result)
        rec.spent("run", time.perf_counter() - sent)
    out = home / "output.parquet"
    cols = ", ".join(COLUMNS[feed.workload])
    exported = f"{rt.sink_path('export')}/*/*.parquet"
    duckdb.sql(
        f"COPY (SELECT {cols} FROM read_parquet('{exported}', hive_partitioning = true)) "
        f"TO '{out}' (FORMAT parquet)"
    )
    return out


# -- plain PySpark ---------------------------------------------------------------------------


def run_plain(feed: Feed, spark: SparkSession, home: Path, rec: Recorder) -> Path:
    """After each file, run every epoch whose files have all arrived (in epoch order: the
    running sum carries its state, a Parquet table per epoch, from one to the next)."""
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
        state = (
            spark.read.parquet(str(home / "state" / str(epoch - 1)))
            if epoch > 0
            else spark.createDataFrame([], "account long, total long")
        )
        new = delta.join(state, "account", "left").select(
            "account", (F.coalesce(F.col("total"), F.lit(0)) + F.col("delta")).alias("total")
        )
        new = new.cache()
        new.write.parquet(target)
        kept = state.join(new.select("account"), "account", "left_anti")
        kept.unionByName(new).write.parquet(str(home / "state" / str(epoch)))
        new.unpersist()

    rec.start()
    for step in feed.steps:
        arrived[step.epoch] = arrived.get(step.epoch, 0) + 1
        rec.delivered()
        while arrived.get(done + 1, 0) == expected:
            done += 1
            run_epoch(done)
            rec.emitted(done)
    out = home / "output.parquet"
    cols = ", ".join(COLUMNS[feed.workload])
    duckdb.sql(
        f"COPY (SELECT {cols} FROM read_parquet('{outputs}/*/*.parquet', "
        f"hive_partitioning = true)) TO '{out}' (FORMAT parquet)"
    )
    shutil.rmtree(home / "state", ignore_errors=True)
    return out
