"""epochgate vs plain PySpark: the bank pipeline, same functions, same files, one Spark session.

    .venv/bin/python bench/bench_overhead.py [--rows 1000000] [--epochs 3] [--accounts 100000]

Both sides run every epoch of the same seeded inputs. The plain script is what one would write
by hand: read the epoch's files, apply the same DataFrame functions, cache the shared movements,
carry balances as a full-state Parquet table, iterate the rings in memory (each round
checkpointed), and write the terminal outputs. epochgate also
validates inputs, writes every stage's output as its own message and commits progress.
Prints per-epoch medians and their ratio (goal <= 1.15).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from pipelines.examples import bank
from pipelines.examples.bank_data import DemoData, generate
from pipelines.runtime import Runtime
from pipelines.spark import quiet, spark_session
from progress.ledger import Ledger


def plain_epoch(
    spark: SparkSession, data: DemoData, epoch: int, out: Path, *, rings: bool = True
) -> None:
    def files(source: str) -> list[str]:
        workers = bank.WORKERS[source]
        return [str(p) for w in range(workers) for p in data.files(source, epoch, w)]

    cards = spark.read.schema(bank.CARD_PAYMENTS).parquet(*files("card_payments"))
    wires = spark.read.schema(bank.WIRE_TRANSFERS).parquet(*files("wire_transfers"))
    accounts = spark.read.schema(bank.ACCOUNTS).parquet(str(data.root / "accounts.parquet"))
    movements = bank.validate_cards(cards).unionByName(bank.validate_wires(wires)).cache()
    target = out / f"epoch={epoch}"
    bank.category_totals(movements).write.parquet(str(target / "category_totals"))
    previous = out / f"epoch={epoch - 1}" / "state"
    state: DataFrame = (
        spark.read.parquet(str(previous)) if epoch > 0 else spark.createDataFrame([], bank.BALANCES)
    )
    touched = bank.update_balances(movements, state).cache()
    touched.write.parquet(str(target / "balances"))
    kept = state.join(touched.select("account_id"), on="account_id", how="left_anti")
    kept.unionByName(touched).write.parquet(str(target / "state"))
    enriched = movements.join(accounts, on=["account_id"])
    enriched.write.parquet(str(target / "enriched"))
    bank.region_totals(enriched).write.parquet(str(target / "region_totals"))
    if rings:
        labels = bank.ring_start(wires).localCheckpoint()
        while True:  # label propagation to a fixed point, lineage cut every round
            following = bank.ring_round(labels, wires).localCheckpoint()
            if following.exceptAll(labels).count() == 0 and following.count() == labels.count():
                break
            labels = following
        labels.write.parquet(str(target / "rings"))
    movements.unpersist()
    touched.unpersist()


def epochgate_epoch(rt: Runtime, data: DemoData, epoch: int) -> None:
    for source, workers in bank.WORKERS.items():
        for w in range(workers):
            for path in data.files(source, epoch, w):
                rt.input(source, w).send(path)
            rt.input(source, w).advance_to(epoch + 1)
    rt.run()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--accounts", type=int, default=100_000)
    parser.add_argument("--spark", default=None, help="Spark master (default local[2])")
    parser.add_argument(
        "--no-rings", action="store_true", help="leave the iterative stage out on both sides"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        started = time.perf_counter()
        data = generate(
            root / "inputs", epochs=args.epochs, rows=args.rows, accounts=args.accounts, seed=1
        )
        took = time.perf_counter() - started
        print(f"generated {args.epochs} epochs x {args.rows:,} rows in {took:.0f}s")
        spark = spark_session(args.spark)
        quiet(spark)
        plain_epoch(spark, data, 0, root / "warmup")  # JIT, caches: neither side pays them

        plain: list[float] = []
        ours: list[float] = []
        rings = not args.no_rings
        pipeline = bank.pipeline(rings=rings)
        rt = Runtime(pipeline, Ledger(root / "ledger.duckdb"), spark, root / "data")
        for epoch in range(args.epochs):
            t = time.perf_counter()
            plain_epoch(spark, data, epoch, root / "plain", rings=rings)
            plain.append(time.perf_counter() - t)
            t = time.perf_counter()
            epochgate_epoch(rt, data, epoch)
            ours.append(time.perf_counter() - t)
            print(f"  epoch {epoch}: plain {plain[-1]:.1f}s, epochgate {ours[-1]:.1f}s", flush=True)
        p, o = statistics.median(plain), statistics.median(ours)
        what = "bank" if rings else "bank without rings"
        print(f"{what}, per-epoch median: plain PySpark {p:.1f}s, epochgate {o:.1f}s")
        print(f"ratio epochgate / plain: {o / p:.2f}  (goal <= 1.15)")


if __name__ == "__main__":
    main()
