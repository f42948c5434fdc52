"""A pipeline with one iterative stage (connected components by label propagation), its DuckDB
oracle, and a child-process entry point that stalls in a chosen round so a test can kill it.

python -m tests.pipelines.chains ROOT STALL_ROUND   # runs `components` for epoch 0
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from pathlib import Path

import duckdb
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines.dataflow import Pipeline, RoundStep
from pipelines.iteration import RoundCallback
from pipelines.runtime import Runtime
from pipelines.spark import spark_session
from progress.ledger import Ledger

LINKS = T.StructType([T.StructField("a", T.LongType()), T.StructField("b", T.LongType())])

PATH_OF_SIX = [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5)]
"""Labels travel one hop per round: five rounds change something, the sixth does not."""


def both_ways(links: DataFrame) -> DataFrame:
    back = links.select(F.col("b").alias("a"), F.col("a").alias("b"))
    return links.unionByName(back)


def start(links: DataFrame) -> DataFrame:
    nodes = both_ways(links).select(F.col("a").alias("node")).distinct()
    return nodes.select("node", F.col("node").alias("component"))


def spread(labels: DataFrame, links: DataFrame) -> DataFrame:
    offers = (
        both_ways(links)
        .join(labels, F.col("b") == F.col("node"))
        .select(F.col("a").alias("node"), "component")
    )
    return labels.unionByName(offers).groupBy("node").agg(F.min("component").alias("component"))


def pipeline(step: RoundStep = spread, max_rounds: int = 50) -> Pipeline:
    p = Pipeline("chains")
    links = p.source("links", schema=LINKS, key=["a", "b"])
    p.iterate("components", links, init=start, step=step, max_rounds=max_rounds)
    return p


def runtime(
    root: Path,
    spark: SparkSession,
    step: RoundStep = spread,
    *,
    max_rounds: int = 50,
    on_round: RoundCallback | None = None,
) -> Runtime:
    ledger = Ledger(root / "ledger.duckdb")
    return Runtime(pipeline(step, max_rounds), ledger, spark, root / "data", on_round=on_round)


def send(rt: Runtime, epochs: Sequence[Sequence[tuple[int, int]]]) -> None:
    """One epoch of links per entry, then close the source."""
    handle = rt.input("links")
    for epoch, links in enumerate(epochs):
        handle.send(rt.spark.createDataFrame(list(links), LINKS))
        handle.advance_to(epoch + 1)
    handle.close()


def oracle(links: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """Components as a transitive closure in DuckDB SQL: each node and its smallest peer."""
    con = duckdb.connect()
    con.execute("CREATE TABLE links (a BIGINT, b BIGINT)")
    if links:
        con.executemany("INSERT INTO links VALUES (?, ?)", [list(link) for link in links])
    rows = con.execute(
        """
        WITH RECURSIVE edges(a, b) AS (SELECT a, b FROM links UNION SELECT b, a FROM links),
        reach(node, other) AS (
            SELECT a, a FROM edges
            UNION SELECT r.node, e.b FROM reach r JOIN edges e ON r.other = e.a
        )
        SELECT node, min(other) FROM reach GROUP BY node ORDER BY node
        """
    ).fetchall()
    return [(int(n), int(c)) for n, c in rows]


def stalling(at_call: int) -> RoundStep:
    """``spread``, except that its ``at_call``-th call (counting from 0) never returns."""
    calls = {"n": 0}

    def step(labels: DataFrame, links: DataFrame) -> DataFrame:
        if calls["n"] == at_call:
            print(f"stalled in call {at_call}", flush=True)
            time.sleep(600)
        calls["n"] += 1
        return spread(labels, links)

    return step


if __name__ == "__main__":
    root, stall = Path(sys.argv[1]), int(sys.argv[2])
    rt = runtime(
        root, spark_session("local[2]", {"spark.sql.shuffle.partitions": "2"}), stalling(stall)
    )
    print("starting", flush=True)
    rt.run_stage("components", 0)
    print("done", flush=True)
