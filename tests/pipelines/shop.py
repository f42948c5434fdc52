"""A small pipeline for runtime tests, its seeded input files, and its DuckDB-SQL oracle.

Sources ``orders`` (2 workers) and ``refunds`` (1 worker) share one schema; ``customers`` gives
each epoch's customer regions. Stages: filter, negate, union, aggregate, join, a delayed stage
(``settled``, two epochs later) and a sink of ``by_category``.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines.dataflow import Pipeline

ORDERS = T.StructType(
    [
        T.StructField("order_id", T.LongType()),
        T.StructField("customer", T.StringType()),
        T.StructField("category", T.StringType()),
        T.StructField("amount", T.DoubleType()),
    ]
)
CUSTOMERS = T.StructType(
    [T.StructField("customer", T.StringType()), T.StructField("region", T.StringType())]
)
ARROW = {
    "orders": pa.schema(
        [
            ("order_id", pa.int64()),
            ("customer", pa.string()),
            ("category", pa.string()),
            ("amount", pa.float64()),
        ]
    ),
    "customers": pa.schema([("customer", pa.string()), ("region", pa.string())]),
}
NAMES = ["ann", "bob", "O'Brien", 'say "hi"', "zoë"]  # quotes and non-ASCII in keys on purpose


def by_category(df: DataFrame) -> DataFrame:
    return df.groupBy("category").agg(F.sum("amount").alias("total"))


def settle(df: DataFrame) -> DataFrame:
    return df.select("order_id", "amount")


def shop(sink: Path, settle: Callable[[DataFrame], DataFrame] = settle) -> Pipeline:
    p = Pipeline("shop")
    orders = p.source("orders", schema=ORDERS, workers=2, key=["order_id"])
    refunds = p.source("refunds", schema=ORDERS, workers=1, key=["order_id"])
    customers = p.source("customers", schema=CUSTOMERS, workers=1, key=["customer"])
    valid = p.transform("valid_orders", orders, fn=lambda df: df.where(F.col("amount") > 0))
    negated = p.transform(
        "refunds_negated", refunds, fn=lambda df: df.withColumn("amount", -F.col("amount"))
    )
    moves = p.union("movements", valid, negated)
    totals = p.transform("by_category", moves, fn=by_category)
    p.join("by_region", moves, customers, on=["customer"])
    p.transform("settled", moves, fn=settle, delay=2)
    p.sink("export", totals, path=str(sink))
    return p


def write_inputs(
    root: Path, source: str, worker: int, epoch: int, *, seed: int, part: int = 0
) -> Path:
    """One seeded input file for one worker of one source at one epoch."""
    rnd = random.Random(f"{seed}:{source}:{worker}:{epoch}:{part}")
    path = root / source / f"w{worker}-e{epoch}-p{part}.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    if source == "customers":
        rows: dict[str, list[Any]] = {
            "customer": NAMES,
            "region": [rnd.choice(["north", "south"]) for _ in NAMES],
        }
        pq.write_table(pa.table(rows, schema=ARROW["customers"]), path)
        return path
    n = rnd.randint(0, 12)
    base = (seed * 1000 + epoch * 100 + worker * 30 + part * 15) * (2 if source == "refunds" else 1)
    rows = {
        "order_id": [base + i for i in range(n)],
        "customer": [rnd.choice(NAMES) for _ in range(n)],
        "category": [rnd.choice(["books", "food", "toys"]) for _ in range(n)],
        "amount": [round(rnd.uniform(-5, 50), 2) for _ in range(n)],
    }
    pq.write_table(pa.table(rows, schema=ARROW["orders"]), path)
    return path


def oracle(files: dict[str, dict[int, list[Path]]], epoch: int) -> dict[str, list[tuple[Any, ...]]]:
    """Every stage's expected output at ``epoch``, in plain DuckDB SQL over the raw files."""
    con = duckdb.connect()

    def view(name: str, source: str, e: int, schema: str) -> None:
        paths = [str(p) for p in files.get(source, {}).get(e, [])]
        if paths:
            con.read_parquet(paths).create_view(name)
        else:
            con.execute(
                f"CREATE OR REPLACE VIEW {name} AS SELECT * FROM (VALUES {schema}) WHERE false"
            )

    empty_orders = "(0::BIGINT, '', '', 0::DOUBLE)) t(order_id, customer, category, amount"
    empty_customers = "('', '')) t(customer, region"
    out: dict[str, list[tuple[Any, ...]]] = {}
    for suffix, e in (("", epoch), ("_before", epoch - 2)):
        view(f"orders{suffix}", "orders", e, empty_orders)
        view(f"refunds{suffix}", "refunds", e, empty_orders)
        con.execute(
            f"""CREATE OR REPLACE VIEW movements{suffix} AS
                SELECT * FROM orders{suffix} WHERE amount > 0
                UNION ALL SELECT order_id, customer, category, -amount FROM refunds{suffix}"""
        )
    view("customers", "customers", epoch, empty_customers)
    queries = {
        "valid_orders": "SELECT * FROM orders WHERE amount > 0",
        "refunds_negated": "SELECT order_id, customer, category, -amount FROM refunds",
        "movements": "SELECT * FROM movements",
        "by_category": "SELECT category, sum(amount) FROM movements GROUP BY category",
        "by_region": "SELECT m.customer, order_id, category, amount, region FROM movements m "
        "JOIN customers c ON m.customer = c.customer",
        "settled": "SELECT order_id, amount FROM movements_before" if epoch >= 2 else None,
    }
    for stage, sql in queries.items():
        if sql is not None:
            out[stage] = sorted(_round(r) for r in con.execute(sql).fetchall())
    con.close()
    return out


def _round(row: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(round(v, 6) if isinstance(v, float) else v for v in row)


def rows_of(df: DataFrame) -> list[tuple[Any, ...]]:
    return sorted(_round(tuple(r)) for r in df.collect())
