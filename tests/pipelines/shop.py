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
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines.dataflow import Pipeline
from pipelines.runtime import Runtime
from progress.ledger import Ledger

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


def shop(
    sink: Path, settle: Callable[[DataFrame], DataFrame] = settle, threshold: float = 0
) -> Pipeline:
    p = Pipeline("shop")
    orders = p.source("orders", schema=ORDERS, workers=2, key=["order_id"])
    refunds = p.source("refunds", schema=ORDERS, workers=1, key=["order_id"])
    customers = p.source("customers", schema=CUSTOMERS, workers=1, key=["customer"])
    valid = p.transform(
        "valid_orders", orders, fn=lambda df: df.where(F.col("amount") > float(threshold))
    )
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


WORKERS = {"orders": 2, "refunds": 1, "customers": 1}


class Shop:
    """Drives the shop pipeline and remembers which raw file went to which epoch."""

    def __init__(self, tmp_path: Path, spark: SparkSession) -> None:
        self.ledger = Ledger(tmp_path / "ledger.duckdb")
        self.sink = tmp_path / "export"
        self.rt = Runtime(shop(self.sink), self.ledger, spark, tmp_path / "data")
        self.raw = tmp_path / "raw"
        self.files: dict[str, dict[int, list[Path]]] = {}

    def send(self, source: str, worker: int, epoch: int, part: int = 0) -> None:
        handle = self.rt.input(source, worker)
        assert handle.epoch == epoch
        path = write_inputs(self.raw, source, worker, epoch, seed=7, part=part)
        handle.send(path)
        self.files.setdefault(source, {}).setdefault(epoch, []).append(path)

    def run_epochs(self, epochs: int) -> None:
        """Every worker sends and advances through ``epochs`` epochs, closes, and all runs."""
        for epoch in range(epochs):
            for source, workers in WORKERS.items():
                for w in range(workers):
                    self.send(source, w, epoch)
                    self.rt.input(source, w).advance_to(epoch + 1)
        for source, workers in WORKERS.items():
            for w in range(workers):
                self.rt.input(source, w).close()
        self.rt.run()


def oracle(
    files: dict[str, dict[int, list[Path]]], epoch: int, threshold: float = 0
) -> dict[str, list[tuple[Any, ...]]]:
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
                SELECT * FROM orders{suffix} WHERE amount > {float(threshold)}
                UNION ALL SELECT order_id, customer, category, -amount FROM refunds{suffix}"""
        )
    view("customers", "customers", epoch, empty_customers)
    queries = {
        "valid_orders": f"SELECT * FROM orders WHERE amount > {float(threshold)}",
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


def published(sink: Path) -> dict[int, list[tuple[Any, ...]]]:
    """The rows a reader of the sink's path finds at each epoch, through DuckDB."""
    if not any(sink.glob("epoch=*/*.parquet")):
        return {}
    con = duckdb.connect()
    found = con.execute(
        "SELECT epoch, category, total FROM read_parquet(?, hive_partitioning = true)",
        [f"{sink}/*/*.parquet"],
    ).fetchall()
    con.close()
    out: dict[int, list[tuple[Any, ...]]] = {}
    for epoch, *row in found:
        out.setdefault(int(epoch), []).append(_round(tuple(row)))
    return {e: sorted(rows) for e, rows in out.items()}


def rows_of(df: DataFrame) -> list[tuple[Any, ...]]:
    return sorted(_round(tuple(r)) for r in df.collect())
