"""How epochgate's per-epoch cost grows: with rows per epoch, with stages, with closed epochs.

    .venv/bin/python bench/bench_scaling.py              # BENCH_SIZE=fast unless set
    BENCH_SIZE=full .venv/bin/python bench/bench_scaling.py [--axes rows stages closed]

Three axes, each setting timed over a few epochs after one warm-up epoch (per-epoch seconds
from the first send to the end of ``run()``; medians and spreads):

* **rows**: ``bank`` without ``rings`` (validations not materialized, ``balances`` full, as in
  ``bench_overhead.py``) at 100,000, 1,000,000 and 5,000,000 rows per epoch (full form), each
  epoch also through the plain PySpark script, in turn. Goal: linear, the seconds per row at
  the largest size at most 1.2x those at the size before it.
* **stages**: generated pipelines of 5, 20 and 50 transforms, as a chain (each reads the one
  before) and side by side (each reads the source), 10,000 rows per epoch. Goal: linear or
  better, the seconds per stage at 50 at most 1.2x those at 5.
* **closed epochs**: a pipeline of two sources (three workers), a transform, a join, an
  aggregation and a sink, 1,000 rows per epoch, measured behind 10, 1,000, 10,000 and 100,000
  closed epochs. The first epochs run for real; the closed epochs beyond them are copies of a
  real epoch written into the ledger (``scaling.history``: its batches, updates, messages, runs
  and lineage, shifted in time, counts folded), since 100,000 real epochs would take days; the
  first epoch after them publishes every copied one to the sink. Goal: flat, the per-epoch time
  behind the most closed epochs at most 1.2x that behind 10.

The fast form (the default, what ``make bench`` runs) uses smaller settings of each axis. The
figures, growth ratios and goals are printed and written to the ``bench_scaling`` section of
``bench/RESULTS.md``, with plots in ``bench/plots/scaling_*.png``.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench_overhead import plain_epoch, send_epoch
from pyspark.sql import SparkSession
from results_file import about_this_run, chosen_size, plot_links, plots_beside, write_section
from scaling import graphs, history
from scaling.report import Point, growths, plot, section
from scratch import scratch

from pipelines.examples import bank
from pipelines.examples.bank_data import generate
from pipelines.run.runtime import Runtime
from pipelines.spark.session import quiet, spark_session
from pipelines.stages.pipeline import Pipeline
from progress.ledger import Ledger

BENCH = Path(__file__).resolve().parent
AXES = ("rows", "stages", "closed")


@dataclass(frozen=True)
class Plan:
    rows: tuple[int, ...]
    """Rows per epoch of ``bank``."""
    stages: tuple[int, ...]
    closed: tuple[int, ...]
    """Closed epochs behind the measured ones (the first is run for real)."""
    epochs: int
    """Measured epochs per setting (after one warm-up epoch)."""
    stage_rows: int = 10_000
    closed_rows: int = 1_000
    accounts: int = 100_000


PLANS = {
    "fast": Plan(
        rows=(10_000, 50_000, 200_000), stages=(2, 5, 10), closed=(10, 100, 1_000), epochs=2
    ),
    "full": Plan(
        rows=(100_000, 1_000_000, 5_000_000),
        stages=(5, 20, 50),
        closed=(10, 1_000, 10_000, 100_000),
        epochs=3,
    ),
}


def say(text: str) -> None:
    print(text, flush=True)


def rows_axis(plan: Plan, spark: SparkSession, root: Path) -> list[Point]:
    points = []
    for rows in plan.rows:
        home = root / f"rows-{rows}"
        clock = time.perf_counter()
        data = generate(
            home / "inputs", epochs=1 + plan.epochs, rows=rows, accounts=plan.accounts, seed=1
        )
        say(
            f"  {rows:,} rows/epoch: {1 + plan.epochs} epochs generated in "
            f"{time.perf_counter() - clock:.0f}s"
        )
        pipeline = bank.pipeline(rings=False, materialize=False, partial=False)
        rt = Runtime(pipeline, Ledger(home / "ledger.duckdb"), spark, home / "data")
        ours: list[float] = []
        plain: list[float] = []
        for epoch in range(1 + plan.epochs):
            clock = time.perf_counter()
            plain_epoch(spark, data, epoch, home / "plain", rings=False)
            p = time.perf_counter() - clock
            clock = time.perf_counter()
            send_epoch(rt, data, epoch)
            rt.run()
            o = time.perf_counter() - clock
            what = "warm-up" if epoch == 0 else "measured"
            say(f"    epoch {epoch} ({what}): plain {p:.2f}s, epochgate {o:.2f}s")
            if epoch:
                plain.append(p)
                ours.append(o)
        points += [
            Point("rows", "epochgate", rows, tuple(ours)),
            Point("rows", "plain PySpark", rows, tuple(plain)),
        ]
        say(f"  {points[-2].line()}\n  {points[-1].line()}")
    return points


def stages_axis(plan: Plan, spark: SparkSession, root: Path) -> list[Point]:
    points = []
    makers: tuple[tuple[str, Callable[[int], Pipeline]], ...] = (
        ("chain", graphs.chain),
        ("fan-out", graphs.fan_out),
    )
    for axis, make in makers:
        for n in plan.stages:
            home = root / f"{axis}-{n}"
            rt = Runtime(make(n), Ledger(home / "ledger.duckdb"), spark, home / "data")
            seconds = []
            for epoch in range(1 + plan.epochs):
                clock = time.perf_counter()
                graphs.send_generated(rt, home / "inputs", epoch, plan.stage_rows)
                rt.run()
                took = time.perf_counter() - clock
                if epoch:
                    seconds.append(took)
            points.append(Point(axis, "epochgate", n, tuple(seconds)))
            say(f"  {points[-1].line()}")
    return points


def closed_axis(plan: Plan, spark: SparkSession, root: Path) -> list[Point]:
    """Run the first setting's epochs for real; before each later setting, copy the last real
    epoch in the ledger until that many epochs are closed, then run one warm-up epoch and the
    measured ones."""
    home = root / "closed"
    ledger_path = home / "ledger.duckdb"
    pipeline = graphs.closing()
    rt = Runtime(pipeline, Ledger(ledger_path), spark, home / "data")
    next_epoch = 0
    template: history.Template | None = None
    points = []

    def one_epoch() -> float:
        nonlocal next_epoch, template
        first = history.last_batch(rt.ledger) + 1
        clock = time.perf_counter()
        graphs.send_closing(rt, home / "inputs", next_epoch, plan.closed_rows)
        rt.run()
        took = time.perf_counter() - clock
        template = history.Template(pipeline.name, next_epoch, first, history.last_batch(rt.ledger))
        next_epoch += 1
        return took

    for setting in plan.closed:
        if next_epoch == 0:
            while next_epoch < setting:
                one_epoch()
        else:
            assert template is not None
            copies = setting - 1 - next_epoch
            clock = time.perf_counter()
            history.copy_epoch(rt.ledger, template, copies)
            next_epoch += max(copies, 0)
            say(
                f"  {max(copies, 0):,} closed epochs copied in the ledger in "
                f"{time.perf_counter() - clock:.1f}s"
            )
            rt = Runtime(pipeline, Ledger(ledger_path), spark, home / "data")
            one_epoch()  # warm-up: a new Runtime on the longer ledger
        behind = next_epoch
        seconds = tuple(one_epoch() for _ in range(plan.epochs))
        points.append(Point("closed", "epochgate", behind, seconds))
        say(f"  {points[-1].line()}")
    verified = rt.ledger.verify(pipeline.name)
    if verified.differences or verified.partial_batches:
        raise SystemExit(f"the closed-epochs ledger does not verify: {verified}")
    return points


def run(plan: Plan, spark: SparkSession, root: Path, axes: Sequence[str] = AXES) -> list[Point]:
    """Every point of the chosen axes, printed as they come."""
    points: list[Point] = []
    for axis, measure in (("rows", rows_axis), ("stages", stages_axis), ("closed", closed_axis)):
        if axis in axes:
            say(f"{axis}:")
            points += measure(plan, spark, root)
    for g in growths(points):
        say(g.line())
    return points


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--axes", nargs="+", choices=AXES, default=list(AXES))
    parser.add_argument("--spark", default=None, help="Spark master (default local[2])")
    parser.add_argument("--results", type=Path, default=BENCH / "RESULTS.md")
    parser.add_argument(
        "--plots", type=Path, help="where the plots go (default: plots/ beside --results)"
    )
    args = parser.parse_args(argv)
    name, plan = chosen_size(PLANS)
    say(f"scaling ({name}: {plan})")
    spark = spark_session(args.spark)
    quiet(spark)
    with scratch("bench-scaling-") as tmp:
        points = run(plan, spark, Path(tmp), args.axes)
    made = plot(points, plots_beside(args.results, args.plots))
    body = section(points, about_this_run(), plot_links(args.results, made))
    write_section(args.results, "bench_scaling", body)
    say(f"written: {args.results}" + "".join(f", {p}" for p in made))


if __name__ == "__main__":
    main()
