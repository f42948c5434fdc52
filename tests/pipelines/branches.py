"""A pipeline of two independent branches over one source, for failures that must not starve
the other branch; its inputs and its DuckDB-SQL oracle.

``big -> big_by_kind`` sums large events per kind each epoch; ``kind_counts -> busy_kinds``
counts events per kind from epoch 0 on (stateful) and keeps the kinds seen twice or more.
``broken()`` is the same pipeline whose ``kind_counts`` raises.
"""

from __future__ import annotations

from typing import Any

import duckdb
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines.carry import StateUpdate
from pipelines.dataflow import Pipeline

EVENTS = T.StructType(
    [
        T.StructField("id", T.LongType()),
        T.StructField("kind", T.StringType()),
        T.StructField("amount", T.DoubleType()),
    ]
)
COUNTS = T.StructType([T.StructField("kind", T.StringType()), T.StructField("n", T.LongType())])
ROWS: dict[int, list[tuple[int, str, float]]] = {
    0: [(1, "card", 12.0), (2, "wire", 3.0), (3, "card", 40.0)],
    1: [(4, "wire", 15.5), (5, "cash", 1.0)],
    2: [(6, "card", 11.0), (7, "cash", 25.0), (8, "wire", 2.5)],
}
EPOCHS = sorted(ROWS)


def count_kinds(batch: DataFrame, state: DataFrame) -> DataFrame:
    """Events per kind since epoch 0."""
    new = batch.groupBy("kind").agg(F.count("*").alias("n"))
    before = state.withColumnRenamed("n", "before")
    total = F.col("n") + F.coalesce(F.col("before"), F.lit(0))
    return new.join(before, on="kind", how="left").select("kind", total.alias("n"))


def failing_count(batch: DataFrame, state: DataFrame) -> DataFrame:
    raise ConnectionError("the kinds service is down")


def pipeline(update: StateUpdate = count_kinds) -> Pipeline:
    p = Pipeline("branches")
    events = p.source("events", schema=EVENTS)
    big = p.transform("big", events, fn=lambda df: df.where("amount > 10"))
    p.transform(
        "big_by_kind", big, fn=lambda df: df.groupBy("kind").agg(F.sum("amount").alias("total"))
    )
    counts = p.stateful("kind_counts", events, key=["kind"], schema=COUNTS, update=update)
    p.transform("busy_kinds", counts, fn=lambda df: df.where("n >= 2"))
    return p


def broken() -> Pipeline:
    return pipeline(failing_count)


def oracle(epoch: int) -> dict[str, list[tuple[Any, ...]]]:
    """Every stage's rows at ``epoch``, in plain DuckDB SQL over ``ROWS``."""
    con = duckdb.connect()
    con.execute("CREATE TABLE events (epoch INT, id BIGINT, kind VARCHAR, amount DOUBLE)")
    rows = [(e, *r) for e, epoch_rows in ROWS.items() for r in epoch_rows]
    con.executemany("INSERT INTO events VALUES (?, ?, ?, ?)", rows)
    counts = f"""
        SELECT kind, count(*) AS n FROM events
        WHERE epoch <= {epoch} AND kind IN (SELECT kind FROM events WHERE epoch = {epoch})
        GROUP BY kind"""
    queries = {
        "big_by_kind": f"""SELECT kind, sum(amount) FROM events
            WHERE epoch = {epoch} AND amount > 10 GROUP BY kind""",
        "kind_counts": counts,
        "busy_kinds": f"SELECT * FROM ({counts}) WHERE n >= 2",
    }
    return {stage: sorted(con.execute(sql).fetchall()) for stage, sql in queries.items()}
