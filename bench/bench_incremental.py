"""State carried, never rebuilt: the cost of epoch ~200 vs epoch ~10 of a stateful stage.

    .venv/bin/python bench/bench_incremental.py [--rows 20000] [--accounts 10000] [--late 200]

A source of movements feeds ``balances`` (the bank example's update function). Each epoch is
timed from send to committed output; the figure is the median of five epochs around 10 and
around ``--late``. Goal: ratio <= 1.2.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import types as T

from pipelines.dataflow import Pipeline
from pipelines.examples import bank
from pipelines.runtime import Runtime
from pipelines.spark import quiet, spark_session
from progress.ledger import Ledger

MOVES = T.StructType(
    [T.StructField("account_id", T.LongType()), T.StructField("amount_cents", T.LongType())]
)


def pipeline() -> Pipeline:
    p = Pipeline("incremental")
    moves = p.source("moves", schema=MOVES, key=["account_id"])
    p.stateful(
        "balances", moves, key=["account_id"], schema=bank.BALANCES, update=bank.update_balances
    )
    return p


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--accounts", type=int, default=10_000)
    parser.add_argument("--late", type=int, default=200)
    args = parser.parse_args()
    rnd = random.Random(5)
    window = range(-2, 3)
    early = {10 + d for d in window}
    late = {args.late + d for d in window}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        spark = spark_session()
        quiet(spark)
        rt = Runtime(pipeline(), Ledger(root / "ledger.duckdb"), spark, root / "data")
        times: dict[int, float] = {}
        for epoch in range(max(late) + 1):
            path = root / "in" / f"{epoch}.parquet"
            path.parent.mkdir(exist_ok=True)
            table = {
                "account_id": [rnd.randrange(args.accounts) for _ in range(args.rows)],
                "amount_cents": [rnd.randint(-5000, 5000) for _ in range(args.rows)],
            }
            pq.write_table(pa.table(table), path)
            t = time.perf_counter()
            rt.input("moves").send(path)
            rt.input("moves").advance_to(epoch + 1)
            rt.run()
            times[epoch] = time.perf_counter() - t
            if epoch % 25 == 0:
                print(f"  epoch {epoch}: {times[epoch]:.2f}s", flush=True)
        e = statistics.median(times[x] for x in early)
        la = statistics.median(times[x] for x in late)
        print(f"epoch ~10: {e:.2f}s   epoch ~{args.late}: {la:.2f}s   (medians of 5 epochs)")
        print(f"ratio late / early: {la / e:.2f}  (goal <= 1.2)")


if __name__ == "__main__":
    main()
