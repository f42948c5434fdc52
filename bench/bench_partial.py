"""Partial state against its full twin, on the same history, measured in one run.

    .venv/bin/python bench/bench_partial.py            # BENCH_SIZE=fast unless set
    BENCH_SIZE=full .venv/bin/python bench/bench_partial.py [--results bench/RESULTS.md]

A source of card movements feeds four keyed stages: ``balances`` (the bank example's stateful
fold) and ``per_account`` (an aggregate: sum, count and max of the amounts), each partial and
as a full twin. Every epoch is sent, run, and then read: one batch of accounts drawn from a Zipf
distribution over 1% of the accounts, looked up in both partial stages. Then, on the history
that built (the full form: 1,000,000 accounts, 50 epochs of 200,000 rows):

* state size, partial / full (goal <= 0.03);
* per-epoch time of the stage, partial / full (median over the epochs; goal <= 0.7);
* a lookup hit (median over many; goal <= 10 ms);
* a miss (the upquery of one evicted key) against rebuilding the full twin's materialization
  (revising every epoch): at least 50x cheaper for the aggregate, 10x for the stateful fold;
* a new partial view added to the pipeline answers its first read, against a new full view
  added with ``from_start`` finishing its backfill of every epoch: at least 50x sooner;
* the cost of an upquery follows the keys asked, not the history: one never-read key's upquery
  with the whole history against the same with half of it (goal <= 1.3).

Each figure is printed with its goal and whether it is met, and with the medians it is
made of, each with its spread (fastest to slowest); every ratio is of figures from the same
run. The fast form only shows that everything runs. The figures go to the ``bench_partial``
section of ``bench/RESULTS.md`` (``--results`` names another file).
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import SparkSession
from pyspark.sql import types as T
from results_file import Report, chosen_size, figure_line, section, spread, write_section
from scratch import scratch

from pipelines import Pipeline, Runtime
from pipelines.examples import bank
from pipelines.results import RunResult
from pipelines.spark.session import quiet, spark_session
from progress.ledger import Ledger

MOVEMENTS = T.StructType(
    [
        T.StructField("movement_id", T.LongType()),
        T.StructField("account_id", T.LongType()),
        T.StructField("merchant", T.StringType()),
        T.StructField("amount_cents", T.LongType()),
    ]
)
AGGS = {
    "cents": ("sum", "amount_cents"),
    "n": ("count", None),
    "largest": ("max", "amount_cents"),
}
MERCHANTS = 200
ZIPF_A = 1.2
BENCH = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Size:
    accounts: int
    epochs: int
    rows: int
    reads: int
    """Keys read per epoch, drawn from a Zipf distribution over 1% of the accounts."""
    hits: int
    """Lookups timed for the hit median."""


SIZES = {
    "fast": Size(accounts=5_000, epochs=2, rows=5_000, reads=40, hits=20),
    "full": Size(accounts=1_000_000, epochs=50, rows=200_000, reads=200, hits=500),
}


def pipeline(extra: Callable[[Pipeline], None] | None = None) -> Pipeline:
    """The movements and the four keyed stages (``extra`` adds more: a view added later)."""
    p = Pipeline("partial_bench")
    moves = p.source("movements", schema=MOVEMENTS)
    for suffix, partial in (("", True), ("_full", False)):
        p.stateful(
            f"balances{suffix}",
            moves,
            key=["account_id"],
            schema=bank.BALANCES,
            update=bank.update_balances,
            partial=partial,
        )
        p.aggregate(f"per_account{suffix}", moves, key=["account_id"], aggs=AGGS, partial=partial)
    if extra is not None:
        extra(p)
    return p


def movements(size: Size, epoch: int, path: Path) -> None:
    rnd = random.Random(epoch)
    first = epoch * size.rows
    table = pa.table(
        {
            "movement_id": pa.array(range(first, first + size.rows), pa.int64()),
            "account_id": pa.array(
                [rnd.randrange(size.accounts) for _ in range(size.rows)], pa.int64()
            ),
            "merchant": pa.array([f"m{rnd.randrange(MERCHANTS)}" for _ in range(size.rows)]),
            "amount_cents": pa.array(
                [rnd.randint(-50_000, 50_000) for _ in range(size.rows)], pa.int64()
            ),
        }
    )
    pq.write_table(table, path)


class Zipf:
    """Accounts drawn from a Zipf distribution over the first 1% of them (account i has rank
    i + 1)."""

    def __init__(self, size: Size, seed: int) -> None:
        hot = max(size.accounts // 100, 1)
        self.accounts = range(hot)
        self.weights = [1 / (rank**ZIPF_A) for rank in range(1, hot + 1)]
        self.rnd = random.Random(seed)

    def keys(self, n: int) -> list[int]:
        return list(dict.fromkeys(self.rnd.choices(self.accounts, self.weights, k=n)))


def timed(fn: Callable[[], object]) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def cold_upquery(rt: Runtime, size: Size, seed: int, stage: str = "per_account") -> list[float]:
    """Seconds of five upqueries, each of one key that was never read (an account outside
    the hot 1%); prints what the last of them read."""
    rnd = random.Random(seed)
    times = []
    for _ in range(5):
        key = rnd.randrange(max(size.accounts // 100, 1), size.accounts)
        rt.evict(stage, [key])
        answer = rt.lookup(stage, [key])
        assert answer.upqueried == [key], answer
        times.append(answer.seconds)
    for scan in answer.scans:
        where = "in the driver" if scan.driver else "with Spark"
        print(
            f"  one key's upquery read {scan.groups_read} of {scan.row_groups} row groups "
            f"({scan.rows} rows) of {scan.files} files, {where}"
        )
    return times


def build_history(
    rt: Runtime, size: Size, root: Path, halfway: Callable[[], None] | None = None
) -> dict[str, list[float]]:
    """Send, run and read every epoch (calling ``halfway`` once half of them are done); the
    seconds of each stage's run, per stage, and of each send (under ``send``)."""
    zipf = Zipf(size, 99)
    seconds: dict[str, list[float]] = {}

    def record(result: RunResult) -> None:
        seconds.setdefault(result.stage, []).append(result.seconds)

    source = rt.input("movements")
    for epoch in range(size.epochs):
        path = root / "in" / f"{epoch}.parquet"
        path.parent.mkdir(exist_ok=True)
        movements(size, epoch, path)
        t = time.perf_counter()
        source.send(path)
        seconds.setdefault("send", []).append(time.perf_counter() - t)
        source.advance_to(epoch + 1)
        rt.run(on_result=record)
        keys = zipf.keys(size.reads)
        for stage in ("balances", "per_account"):
            rt.lookup(stage, keys)
        print(f"  epoch {epoch}: {time.perf_counter() - t:.1f}s", flush=True)
        if halfway is not None and epoch + 1 == size.epochs // 2:
            halfway()
    return seconds


def run(size: Size, spark: SparkSession, root: Path) -> list[str]:
    """Build the history and measure every figure, printed as it comes; the lines to write:
    each goal's figure and the figures it is made of."""
    out = Report()
    ledger = Ledger(root / "ledger.duckdb")
    rt = Runtime(pipeline(), ledger, spark, root / "data")
    at_half: list[list[float]] = []
    seconds = build_history(rt, size, root, lambda: at_half.append(cold_upquery(rt, size, 1)))
    epochs = list(range(size.epochs))
    at_full = cold_upquery(rt, size, 2)
    out.detail(f"send of one epoch's movements: {spread(seconds['send'], digits=3)}")
    half, whole = size.epochs // 2, size.epochs
    out.detail(f"one never-read key's upquery at {half} epochs: {spread(at_half[0], digits=3)}")
    out.detail(f"one never-read key's upquery at {whole} epochs: {spread(at_full, digits=3)}")
    out.figure(
        figure_line(
            f"per_account: one key's upquery at {whole} / at {half} epochs",
            statistics.median(at_full) / statistics.median(at_half[0]),
            1.3,
            why="of the medians",
        )
    )

    for partial, full in (("balances", "balances_full"), ("per_account", "per_account_full")):
        p_info, f_info = rt.state_info(partial), rt.state_info(full)
        out.figure(
            figure_line(
                f"{partial}: state bytes partial / full "
                f"({p_info.present_keys} of {f_info.present_keys} keys)",
                p_info.bytes / max(f_info.bytes, 1),
                0.03,
            )
        )
        out.detail(f"{partial}: per-epoch time, partial: {spread(seconds[partial], digits=3)}")
        out.detail(f"{partial}: per-epoch time, full twin: {spread(seconds[full], digits=3)}")
        ratio = statistics.median(seconds[partial]) / statistics.median(seconds[full])
        out.figure(figure_line(f"{partial}: per-epoch time partial / full (median)", ratio, 0.7))

    zipf = Zipf(size, 7)
    for stage in ("balances", "per_account"):
        present = zipf.keys(size.reads)
        rt.lookup(stage, present)  # every one present now
        hits = [rt.lookup(stage, [k]).seconds for k in present[: size.hits]]
        while len(hits) < size.hits:
            hits.append(rt.lookup(stage, [present[len(hits) % len(present)]]).seconds)
        hits_ms = [x * 1000 for x in hits]
        out.detail(f"{stage}: lookup hits: {spread(hits_ms, ' ms', 3)}")
        out.figure(
            figure_line(
                f"{stage}: lookup hit, median", statistics.median(hits_ms), 10, unit=" ms", digits=0
            )
        )

    rebuild_against_miss(rt, zipf, epochs, out)
    new_view(ledger, spark, root, out)
    return out.lines


def rebuild_against_miss(rt: Runtime, zipf: Zipf, epochs: list[int], out: Report) -> None:
    """One miss (an evicted key's upquery) against rebuilding the full twin, per stage."""
    for stage, full, goal in (
        ("per_account", "per_account_full", 50),
        ("balances", "balances_full", 10),
    ):
        misses = []
        for key in zipf.keys(3):
            rt.evict(stage, [key])
            answer = rt.lookup(stage, [key])
            assert answer.upqueried == [key], answer
            misses.append(answer.seconds)
        started = time.perf_counter()
        rt.revise(full, epochs)
        rebuild = time.perf_counter() - started
        out.detail(f"{stage}: one miss: {spread(misses)}")
        out.detail(f"{stage}: rebuilding the full twin (every epoch revised): {rebuild:.2f}s")
        out.figure(
            figure_line(
                f"{stage}: rebuilding the full twin / one miss",
                rebuild / statistics.median(misses),
                goal,
                at_most=False,
                digits=0,
                places=1,
                why="against the median miss",
            )
        )


def new_view(ledger: Ledger, spark: SparkSession, root: Path, out: Report) -> None:
    """A new partial view's first read against a new full view's backfill of every epoch."""

    def partial_view(p: Pipeline) -> None:
        p.aggregate("view", "movements", key=["account_id"], aggs=AGGS, partial=True)

    def full_view(p: Pipeline) -> None:
        partial_view(p)
        p.aggregate("view_full", "movements", key=["account_id"], aggs=AGGS)

    with_view = Runtime(pipeline(partial_view), ledger, spark, root / "data")
    first_read = timed(lambda: with_view.lookup("view", [0]))
    with_full = Runtime(pipeline(full_view), ledger, spark, root / "data", from_start=True)
    backfill = timed(with_full.run)
    assert with_full.lookup("view_full", [0]).rows == with_view.lookup("view", [0]).rows
    out.detail(f"new partial view's first read: {first_read:.2f}s")
    out.detail(f"new full view's backfill of every epoch: {backfill:.2f}s")
    out.figure(
        figure_line(
            "new partial view's first read vs full view's backfill",
            backfill / first_read,
            50,
            at_most=False,
            digits=0,
            places=1,
        )
    )


def partial_section(lines: Sequence[str], size: Size, size_name: str) -> str:
    return section(
        "bench_partial: partial state against its full twin, on the same history",
        [
            f"size: {size_name}; {size.accounts:,} accounts, {size.epochs} epochs of "
            f"{size.rows:,} rows, {size.reads} keys read per epoch (Zipf over 1% of the "
            f"accounts), {size.hits} lookup hits timed per stage",
            "figures over repeated calls or epochs: median (spread: fastest to slowest); each "
            "ratio is of figures from this run",
        ],
        lines,
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=BENCH / "RESULTS.md")
    args = parser.parse_args(argv)
    name, size = chosen_size(SIZES)
    print(f"partial state vs full twin ({name}: {size})", flush=True)
    spark = spark_session()
    quiet(spark)
    with scratch("bench-partial-") as tmp:
        lines = run(size, spark, Path(tmp))
    write_section(args.results, "bench_partial", partial_section(lines, size, name))
    print(f"written: {args.results}")


if __name__ == "__main__":
    main()
