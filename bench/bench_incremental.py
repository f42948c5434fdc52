"""State carried, never rebuilt: the cost of epoch ~200 vs epoch ~10 of a stateful stage.

    .venv/bin/python bench/bench_incremental.py            # BENCH_SIZE=fast unless set
    BENCH_SIZE=full .venv/bin/python bench/bench_incremental.py [--rows 20000] [--late 200]

A source of movements feeds ``balances`` (the bank example's update function). Each epoch is
timed from send to committed output; the figures are the median of five epochs around 10 and
of five around the late epoch (the full form: 200, with 20,000 rows per epoch over 10,000
accounts; the fast form: 50, with 5,000 rows over 5,000 accounts), each with its spread, and
the ratio of the two medians, late / early (goal <= 1.2). The figures go to the
``bench_incremental`` section of ``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import SparkSession
from pyspark.sql import types as T
from results_file import chosen_size, figure_line, section, spread, write_section
from scratch import scratch

from pipelines.examples import bank
from pipelines.run.runtime import Runtime
from pipelines.spark.session import quiet, spark_session
from pipelines.stages.pipeline import Pipeline
from progress.ledger import Ledger

MOVES = T.StructType(
    [T.StructField("account_id", T.LongType()), T.StructField("amount_cents", T.LongType())]
)
GOAL = 1.2
"""The goal of the ratio late / early."""
BENCH = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Size:
    rows: int
    """Movements per epoch."""
    accounts: int
    late: int
    """The epoch the late figure is centred on."""
    early: int = 10
    """The epoch the early figure is centred on."""
    around: int = 2
    """Epochs timed either side of each centre (two: five epochs per figure)."""

    def epochs(self, centre: int) -> list[int]:
        return list(range(centre - self.around, centre + self.around + 1))


SIZES = {
    "fast": Size(rows=5_000, accounts=5_000, late=50),
    "full": Size(rows=20_000, accounts=10_000, late=200),
}


def pipeline() -> Pipeline:
    p = Pipeline("incremental")
    moves = p.source("moves", schema=MOVES, key=["account_id"])
    p.stateful(
        "balances", moves, key=["account_id"], schema=bank.BALANCES, update=bank.update_balances
    )
    return p


@dataclass(frozen=True)
class Figures:
    """Seconds of each epoch timed around the early and the late centre."""

    size: Size
    early: list[float]
    late: list[float]

    @property
    def ratio(self) -> float:
        return statistics.median(self.late) / statistics.median(self.early)

    def lines(self) -> list[str]:
        """The figures as printed and written."""
        size = self.size
        return [
            f"epoch ~{size.early}, send to committed output: {spread(self.early)}",
            f"epoch ~{size.late}, send to committed output: {spread(self.late)}",
            figure_line("ratio late / early", self.ratio, GOAL, places=2, why="of the medians"),
        ]


def run(size: Size, spark: SparkSession, root: Path) -> Figures:
    """Send, run and time every epoch up to the late window; the figures, printed."""
    if size.early - size.around < 0 or size.late - size.around <= size.early + size.around:
        raise SystemExit(f"the early and late windows must not overlap: {size}")
    rnd = random.Random(5)
    rt = Runtime(pipeline(), Ledger(root / "ledger.duckdb"), spark, root / "data")
    times: dict[int, float] = {}
    last = size.late + size.around
    for epoch in range(last + 1):
        path = root / "in" / f"{epoch}.parquet"
        path.parent.mkdir(exist_ok=True)
        table = {
            "account_id": [rnd.randrange(size.accounts) for _ in range(size.rows)],
            "amount_cents": [rnd.randint(-5000, 5000) for _ in range(size.rows)],
        }
        pq.write_table(pa.table(table), path)
        t = time.perf_counter()
        rt.input("moves").send(path)
        rt.input("moves").advance_to(epoch + 1)
        rt.run()
        times[epoch] = time.perf_counter() - t
        if epoch % 25 == 0 or epoch == last:
            print(f"  epoch {epoch}: {times[epoch]:.2f}s", flush=True)
    found = Figures(
        size,
        [times[e] for e in size.epochs(size.early)],
        [times[e] for e in size.epochs(size.late)],
    )
    for line in found.lines():
        print(line, flush=True)
    return found


def incremental_section(found: Figures, size_name: str) -> str:
    size = found.size
    n = 2 * size.around + 1
    return section(
        "bench_incremental: a stateful stage's epoch, early against late",
        [
            f"size: {size_name}; {size.rows:,} movements per epoch over {size.accounts:,} "
            f"accounts, {size.late + size.around + 1} epochs, folded into `balances`",
            f"each figure over the {n} epochs around its centre (median, spread: fastest to "
            "slowest epoch); the ratio is of the medians from this run",
        ],
        found.lines(),
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, help="movements per epoch (default: the size's)")
    parser.add_argument("--accounts", type=int, help="accounts (default: the size's)")
    parser.add_argument("--late", type=int, help="the late epoch (default: the size's)")
    parser.add_argument("--results", type=Path, default=BENCH / "RESULTS.md")
    args = parser.parse_args(argv)
    name, size = chosen_size(SIZES)
    size = Size(args.rows or size.rows, args.accounts or size.accounts, args.late or size.late)
    print(f"incremental ({name}: {size})", flush=True)
    spark = spark_session()
    quiet(spark)
    with scratch("bench-incremental-") as tmp:
        found = run(size, spark, Path(tmp))
    write_section(args.results, "bench_incremental", incremental_section(found, name))
    print(f"written: {args.results}")


if __name__ == "__main__":
    main()
