"""Partial state against its full twin, on the same history, measured in one run.

    .venv/bin/python bench/bench_partial.py            # BENCH_SIZE=fast unless set
    BENCH_SIZE=full .venv/bin/python bench/bench_partial.py

A source of card movements feeds four keyed stages: ``balances`` (the bank example's stateful
fold) and ``per_account`` (an aggregate: sum, count and max of the amounts), each partial and
as a full twin. Every epoch is sent, run, and then read: one batch of accounts drawn from a Zipf
distribution over 1% of the accounts, looked up in both partial stages. Then, on the history
that built (the full form: 1,000,000 accounts, 50 epochs of 200,000 rows):

* state size, partial / full (goal <= 0.03);
* per-epoch time of the stage, partial / full (median over the epochs; goal <= 0.7);
* a lookup hit (median over many; goal < 10 ms);
* a miss (the upquery of one evicted key) against rebuilding the full twin's materialization
  (revising every epoch): at least 50x cheaper for the aggregate, 10x for the stateful fold;
* a new partial view added to the pipeline answers its first read, against a new full view
  added with ``from_start`` finishing its backfill of every epoch: at least 50x sooner;
* the cost of an upquery follows the keys asked, not the history: one never-read key's upquery
  with the whole history against the same with half of it (goal <= 1.3).

Each figure is printed with its goal; the fast form only shows that everything runs.
"""

from __future__ import annotations

import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import SparkSession
from pyspark.sql import types as T

from pipelines import Pipeline, Runtime
from pipelines.examples import bank
from pipelines.results import RunResult
from pipelines.spark import quiet, spark_session
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


def median_ms(values: list[float]) -> float:
    return statistics.median(values) * 1000


def figure(name: str, value: float, goal: str, unit: str = "") -> None:
    print(f"{name:<62} {value:>10.3f}{unit}   (goal {goal})", flush=True)


def timed(fn: Callable[[], object]) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def cold_upquery(rt: Runtime, size: Size, seed: int, stage: str = "per_account") -> float:
    """Seconds of an upquery of one key that was never read (an account outside the hot 1%),
    the median of five; prints what the last of them read."""
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
    return statistics.median(times)


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


def main() -> None:
    name = os.environ.get("BENCH_SIZE", "fast")
    if name not in SIZES:
        sys.exit(f"BENCH_SIZE must be one of {', '.join(SIZES)}, not {name!r}")
    size = SIZES[name]
    print(f"partial state vs full twin ({name}: {size})", flush=True)
    spark = spark_session()
    quiet(spark)
    with tempfile.TemporaryDirectory() as tmp:
        run(size, spark, Path(tmp))


def run(size: Size, spark: SparkSession, root: Path) -> None:
    ledger = Ledger(root / "ledger.duckdb")
    rt = Runtime(pipeline(), ledger, spark, root / "data")
    at_half: list[float] = []
    seconds = build_history(rt, size, root, lambda: at_half.append(cold_upquery(rt, size, 1)))
    epochs = list(range(size.epochs))
    at_full = cold_upquery(rt, size, 2)
    print(f"  send of one epoch's movements: {statistics.median(seconds['send']):.3f}s (median)")
    print(
        f"  one key's upquery: {at_half[0]:.3f}s at {size.epochs // 2} epochs, "
        f"{at_full:.3f}s at {size.epochs}"
    )
    figure(
        f"per_account: one key's upquery at {size.epochs} / at {size.epochs // 2} epochs",
        at_full / at_half[0],
        "<= 1.3",
    )

    for partial, full in (("balances", "balances_full"), ("per_account", "per_account_full")):
        p_info, f_info = rt.state_info(partial), rt.state_info(full)
        figure(
            f"{partial}: state bytes partial / full "
            f"({p_info.present_keys} of {f_info.present_keys} keys)",
            p_info.bytes / max(f_info.bytes, 1),
            "<= 0.03",
        )
        ratio = statistics.median(seconds[partial]) / statistics.median(seconds[full])
        figure(f"{partial}: per-epoch time partial / full (median)", ratio, "<= 0.7")

    zipf = Zipf(size, 7)
    for stage in ("balances", "per_account"):
        present = zipf.keys(size.reads)
        rt.lookup(stage, present)  # every one present now
        hits = [rt.lookup(stage, [k]).seconds for k in present[: size.hits]]
        while len(hits) < size.hits:
            hits.append(rt.lookup(stage, [present[len(hits) % len(present)]]).seconds)
        figure(f"{stage}: lookup hit, median", median_ms(hits), "< 10 ms", " ms")

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
        miss = statistics.median(misses)
        rebuild = timed(lambda full=full: rt.revise(full, epochs))
        print(f"  {stage}: miss {miss:.2f}s (median of {len(misses)}), rebuild {rebuild:.1f}s")
        figure(f"{stage}: rebuilding the full twin / one miss", rebuild / miss, f">= {goal}")

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
    print(f"  new view: first read {first_read:.2f}s; full view's backfill {backfill:.1f}s")
    figure("new partial view's first read vs full view's backfill", backfill / first_read, ">= 50")


if __name__ == "__main__":
    main()
