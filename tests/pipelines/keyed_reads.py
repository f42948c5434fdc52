"""A pipeline of keyed stages, partial and full, for reads of keyed state from the command
line; its inputs and its DuckDB-SQL oracle.

``balances`` (partial stateful fold) and ``per_day`` (partial aggregate keyed by account and
day, at most 2 keys) keep only the keys that are read; ``per_kind`` (aggregate keyed by text)
keeps every key; ``big`` is a transform (no keyed state).
"""

from __future__ import annotations

import datetime
from typing import Any

import duckdb
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines import PartialState, Pipeline

MOVES = T.StructType(
    [
        T.StructField("account", T.LongType()),
        T.StructField("day", T.DateType()),
        T.StructField("kind", T.StringType()),
        T.StructField("cents", T.LongType()),
    ]
)
BALANCES = T.StructType(
    [
        T.StructField("account", T.LongType()),
        T.StructField("balance", T.LongType()),
        T.StructField("n", T.LongType()),
    ]
)
D1, D2 = datetime.date(2026, 1, 1), datetime.date(2026, 1, 2)
ROWS: dict[int, list[tuple[int, datetime.date, str, int]]] = {
    0: [(1, D1, "card", 500), (2, D1, "wire", 70), (1, D1, "card", -20)],
    1: [(2, D2, "card", 300), (3, D2, "cash", 15), (1, D2, "wire", 40)],
}


def add_moves(batch: DataFrame, state: DataFrame) -> DataFrame:
    """Each account's balance and number of moves since epoch 0."""
    moved = batch.groupBy("account").agg(F.sum("cents").alias("d"), F.count("*").alias("c"))
    joined = moved.join(state, on="account", how="left")
    return joined.select(
        "account",
        (F.coalesce(F.col("balance"), F.lit(0)) + F.col("d")).alias("balance"),
        (F.coalesce(F.col("n"), F.lit(0)) + F.col("c")).alias("n"),
    )


def pipeline() -> Pipeline:
    p = Pipeline("ledgers")
    moves = p.source("moves", schema=MOVES)
    p.stateful("balances", moves, key=["account"], schema=BALANCES, update=add_moves, partial=True)
    p.aggregate(
        "per_day",
        moves,
        key=["account", "day"],
        aggs={"cents": ("sum", "cents"), "n": ("count", None)},
        partial=PartialState(max_keys=2),
    )
    p.aggregate(
        "per_kind",
        moves,
        key=["kind"],
        aggs={"cents": ("sum", "cents"), "largest": ("max", "cents")},
    )
    p.transform("big", moves, fn=lambda df: df.where("cents > 100"))
    return p


def oracle(sql: str) -> list[tuple[Any, ...]]:
    """``sql`` in plain DuckDB over ``moves(epoch, account, day, kind, cents)`` from ``ROWS``."""
    con = duckdb.connect()
    con.execute(
        "CREATE TABLE moves (epoch INT, account BIGINT, day DATE, kind VARCHAR, cents BIGINT)"
    )
    rows = [(e, *r) for e, epoch_rows in ROWS.items() for r in epoch_rows]
    con.executemany("INSERT INTO moves VALUES (?, ?, ?, ?, ?)", rows)
    return con.execute(sql).fetchall()
