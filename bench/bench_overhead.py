"""epochgate vs plain PySpark: the bank pipeline, same functions, same files, one Spark session.

    .venv/bin/python bench/bench_overhead.py            # BENCH_SIZE=fast unless set
    BENCH_SIZE=full .venv/bin/python bench/bench_overhead.py [--profile]

Both sides run every epoch of the same seeded inputs, epoch by epoch in turn (so both see the
same load). The plain script is what one would write by hand: read the epoch's files, apply
the same DataFrame functions, cache the shared movements, carry balances as a full-state
Parquet table, iterate the rings in memory (each round checkpointed), and write the terminal
outputs. epochgate also validates inputs, writes every materialized stage's output as its own
message and commits progress. Its two validations are declared ``materialize=False`` (the plain
script does not write them either: ``movements`` applies them to the sources' files), unless
``--materialized``; they still commit a message per epoch, with its lineage. ``balances`` is
a full stateful stage here, as in the plain script (every account's balance, every epoch);
``--partial`` runs it partial, as the bank example declares it, which writes only the accounts
that are read and so does less work than the plain script.

Four ratios epochgate / plain (per-epoch medians), each with its goal: at scale (the full form:
1,000,000 rows per epoch) without the iterative ``rings`` stage (goal <= 1.10) and with it
(<= 1.05), and for small epochs (2,000 rows per epoch) without and with it (<= 1.5). The load
average is printed beside them: the machine may be shared. ``--profile`` adds where
epochgate's seconds go, per stage: Spark jobs, and wall time to plan, write, count and commit.
The figures go to the ``bench_overhead`` section of ``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from results_file import about_this_run, write_section
from scratch import scratch

from pipelines.examples import bank
from pipelines.examples.bank_data import DemoData, generate
from pipelines.run import carry, iteration, sinks
from pipelines.run.runtime import Runtime
from pipelines.run.storage import DataStore
from pipelines.run.work import StageWork
from pipelines.spark.session import is_connect, quiet, spark_session
from progress.ledger import Ledger

BENCH = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Size:
    small: int
    """Rows per epoch of the small epochs."""
    large: int
    """Rows per epoch at scale."""
    epochs: int
    accounts: int


SIZES = {
    "fast": Size(small=2_000, large=20_000, epochs=3, accounts=10_000),
    "full": Size(small=2_000, large=1_000_000, epochs=5, accounts=100_000),
}
GOALS = {("large", False): 1.10, ("large", True): 1.05, ("small", False): 1.5, ("small", True): 1.5}
"""The goal of each ratio epochgate / plain, by (size, with rings)."""
GROUP_IDS = itertools.count()
"""Numbers the job groups of every profiler in the process: Spark's status tracker keeps the
jobs of a group name for the whole session, so a name used twice (a later comparison's run at
the same epoch) would count the earlier run's jobs too."""
PHASES = ("plan", "write", "count", "commit", "sink")
"""Phases of a stage run: reading its input and planning (an iterative stage's rounds too),
writing its message, counting rows and checking keys, the ledger commit, publishing a sink."""


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
        spark.read.schema(bank.BALANCES).parquet(str(previous))
        if epoch > 0
        else spark.createDataFrame([], bank.BALANCES)
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


def send_epoch(rt: Runtime, data: DemoData, epoch: int) -> None:
    for source, workers in bank.WORKERS.items():
        for w in range(workers):
            for path in data.files(source, epoch, w):
                rt.input(source, w).send(path)
            rt.input(source, w).advance_to(epoch + 1)


# -- where epochgate's seconds go -------------------------------------------------------------


@dataclass
class Profile:
    """Per stage and phase, the seconds of each epoch; per stage, its Spark jobs per epoch."""

    seconds: dict[tuple[str, str], list[float]] = field(default_factory=lambda: defaultdict(list))
    jobs: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    overall: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    """Per epoch, outside the stage runs: sending and advancing, scheduling (reading counts
    and readiness in the ledger), admitting runs (resolving their input, recording them)."""


class Profiler:
    """Times the phases of ``rt``'s stage runs and counts their Spark jobs (a job group per
    stage run; a classic session only: a Connect client has no status tracker here)."""

    def __init__(self, rt: Runtime, spark: SparkSession) -> None:
        self.rt = rt
        self.spark = None if is_connect(spark) else spark
        self.current: str | None = None
        self.epoch: dict[tuple[str, str], float] = defaultdict(float)
        self.groups: list[str] = []
        self.inner: list[float] = []
        """Per timed call under way, the seconds of the timed calls inside it so far."""
        self.profile = Profile()

    def timed(self, phase: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn``, its seconds added to ``phase`` of the current stage, less those of the timed
        calls inside it (they count in their own phases)."""

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            self.inner.append(0.0)
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                took = time.perf_counter() - started
                self.epoch[(self.current or "", phase)] += took - self.inner.pop()
                if self.inner:
                    self.inner[-1] += took

        return wrapper

    @contextmanager
    def patched(self) -> Iterator[None]:
        """Wrap the run's parts with timers for as long as it is held."""
        rt, ex = self.rt, self.rt.executor
        saved: list[tuple[object, str, object]] = []

        def patch(owner: object, name: str, wrap: Callable[[Any], Any]) -> None:
            original = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
            saved.append((owner, name, original))
            setattr(owner, name, wrap(getattr(owner, name)))

        def work(fn: Callable[..., Any]) -> Callable[..., Any]:
            def wrapper(run: Any) -> Any:
                self.current = run.stage.name
                group = f"{run.stage.name}/{run.epoch}/{next(GROUP_IDS)}"
                self.groups.append(group)
                if self.spark is not None:
                    self.spark.sparkContext.setJobGroup(group, "bench_overhead")
                try:
                    return self.timed("plan", fn)(run)
                finally:
                    self.current = None
                    if self.spark is not None:
                        self.spark.sparkContext.setJobGroup("bench_overhead", "between runs")

            return wrapper

        def finish(fn: Callable[..., Any]) -> Callable[..., Any]:
            def wrapper(worked: Any) -> Any:
                self.current = worked.run.stage.name
                try:
                    return self.timed("commit", fn)(worked)
                finally:
                    self.current = None

            return wrapper

        def staticmethod_timed(phase: str) -> Callable[[Any], Any]:
            return lambda fn: staticmethod(self.timed(phase, fn))

        patch(ex, "work", work)
        patch(ex, "finish", finish)
        patch(ex, "admit", lambda fn: self.timed("admit", fn))
        patch(rt, "_next", lambda fn: self.timed("schedule", fn))
        patch(StageWork, "write", lambda fn: self.timed("write", fn))
        patch(iteration.Rounds, "_write", lambda fn: self.timed("write", fn))
        patch(DataStore, "stats", staticmethod_timed("count"))
        patch(sinks.SinkDirectory, "publish", lambda fn: self.timed("sink", fn))
        patch(carry, "free_of_nulls", lambda fn: self.timed("count", fn))
        patch(carry, "_refuse_null_keys", lambda fn: self.timed("count", fn))
        try:
            yield
        finally:
            for owner, name, original in reversed(saved):
                if isinstance(owner, type) or owner is carry:
                    setattr(owner, name, original)
                else:  # the instance's own attribute goes: its class's method shows again
                    delattr(owner, name)

    def end_epoch(self, sending: float) -> None:
        """File this epoch's seconds and jobs, and start the next epoch afresh."""
        spent, self.epoch = self.epoch, defaultdict(float)
        p = self.profile
        stages = sorted({s for s, _ in spent if s})
        for stage in stages:
            for phase in PHASES:
                p.seconds[(stage, phase)].append(spent[(stage, phase)])
        p.overall["send and advance"].append(sending)
        p.overall["schedule"].append(spent[("", "schedule")])
        p.overall["admit"].append(spent[("", "admit")])
        if self.spark is not None:
            tracker = self.spark.sparkContext.statusTracker()
            counts: dict[str, int] = defaultdict(int)
            for group in self.groups:
                counts[group.split("/", 1)[0]] += len(tracker.getJobIdsForGroup(group))
            for stage in stages:
                p.jobs[stage].append(counts[stage])
        self.groups = []


def profile_lines(profile: Profile) -> list[str]:
    """The profile as a Markdown table: medians per epoch."""
    stages = sorted({s for s, _ in profile.seconds})
    lines = [
        "| stage | Spark jobs | " + " | ".join(PHASES) + " | total |",
        "|---|---|" + "---|" * (len(PHASES) + 1),
    ]
    for stage in stages:
        cells = [statistics.median(profile.seconds[(stage, phase)]) for phase in PHASES]
        jobs = profile.jobs.get(stage)
        njobs = f"{statistics.median(jobs):g}" if jobs else "-"
        lines.append(
            f"| {stage} | {njobs} | "
            + " | ".join(f"{c:.2f}s" for c in cells)
            + f" | {sum(cells):.2f}s |"
        )
    outside = ", ".join(f"{k} {statistics.median(v):.2f}s" for k, v in profile.overall.items())
    lines += ["", f"Outside the stage runs, per epoch: {outside}."]
    return lines


# -- one comparison ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Ratio:
    size: str
    rows: int
    rings: bool
    materialize: bool
    partial: bool
    plain: list[float]
    ours: list[float]
    load: float
    profile: Profile | None

    @property
    def goal(self) -> float:
        return GOALS[(self.size, self.rings)]

    @property
    def value(self) -> float:
        return statistics.median(self.ours) / statistics.median(self.plain)

    @property
    def met(self) -> bool:
        return self.value <= self.goal

    def line(self) -> str:
        what = "bank" if self.rings else "bank without rings"
        what += "" if self.materialize else " (validations not materialized)"
        what += " (balances partial)" if self.partial else ""
        p, o = statistics.median(self.plain), statistics.median(self.ours)
        return (
            f"{what}, {self.rows:,} rows/epoch: ratio epochgate / plain {self.value:.2f} "
            f"(goal <= {self.goal:.2f}: {'met' if self.met else 'NOT met'}); per-epoch median "
            f"plain {p:.2f}s (spread {min(self.plain):.2f}-{max(self.plain):.2f}), epochgate "
            f"{o:.2f}s (spread {min(self.ours):.2f}-{max(self.ours):.2f}), load {self.load:.1f}"
        )


def compare(  # noqa: PLR0917 (one comparison's settings)
    spark: SparkSession,
    data: DemoData,
    root: Path,
    size: str,
    rows: int,
    rings: bool,
    *,
    profile: bool = False,
    materialize: bool = False,
    partial: bool = False,
) -> Ratio:
    """Run every epoch of ``data`` on both sides, in turn; the ratio of their medians."""
    pipeline = bank.pipeline(rings=rings, materialize=materialize, partial=partial)
    rt = Runtime(pipeline, Ledger(root / "ledger.duckdb"), spark, root / "data")
    profiler = Profiler(rt, spark) if profile else None
    plain: list[float] = []
    ours: list[float] = []
    loads: list[float] = []
    for epoch in range(data.epochs):
        loads.append(os.getloadavg()[0])
        started = time.perf_counter()
        plain_epoch(spark, data, epoch, root / "plain", rings=rings)
        plain.append(time.perf_counter() - started)
        started = time.perf_counter()
        if profiler is None:
            send_epoch(rt, data, epoch)
            rt.run()
        else:
            with profiler.patched():
                send_epoch(rt, data, epoch)
                sent = time.perf_counter() - started
                rt.run()
            profiler.end_epoch(sent)
        ours.append(time.perf_counter() - started)
        print(f"    epoch {epoch}: plain {plain[-1]:.2f}s, epochgate {ours[-1]:.2f}s", flush=True)
    found = profiler.profile if profiler is not None else None
    load = statistics.median(loads)
    return Ratio(size, rows, rings, materialize, partial, plain, ours, load, found)


def run(
    size: Size,
    spark: SparkSession,
    root: Path,
    *,
    profile: bool = False,
    sizes: Sequence[str] = ("small", "large"),
    materialize: bool = False,
    partial: bool = False,
) -> list[Ratio]:
    """Every ratio of ``size`` (of those of ``sizes``: small, large), printed as it comes."""
    ratios: list[Ratio] = []
    rows_of = {"small": size.small, "large": size.large}
    for name, rows in ((s, rows_of[s]) for s in sizes):
        started = time.perf_counter()
        inputs = root / name / "inputs"
        data = generate(inputs, epochs=size.epochs, rows=rows, accounts=size.accounts, seed=1)
        took = time.perf_counter() - started
        print(f"{size.epochs} epochs x {rows:,} rows generated in {took:.0f}s", flush=True)
        plain_epoch(spark, data, 0, root / name / "warmup")  # JIT, caches: neither side pays
        for rings in (False, True):
            print(f"  {'with' if rings else 'without'} rings:", flush=True)
            home = root / name / ("rings" if rings else "no-rings")
            ratio = compare(
                spark,
                data,
                home,
                name,
                rows,
                rings,
                profile=profile,
                materialize=materialize,
                partial=partial,
            )
            print(f"  {ratio.line()}", flush=True)
            if ratio.profile is not None:
                print("\n".join(f"    {line}" for line in profile_lines(ratio.profile)))
            ratios.append(ratio)
    return ratios


def section(ratios: Sequence[Ratio], epochs: int) -> str:
    lines = [
        "## bench_overhead: epochgate against plain PySpark on the bank pipeline",
        "",
        *about_this_run(),
        f"- epochs: {epochs} per comparison, both sides in turn in one Spark session; figures "
        "are per-epoch medians (spread: fastest to slowest epoch); load: the median 1-minute "
        "load average when each epoch started",
        "",
        *(f"- {r.line()}" for r in ratios),
    ]
    for r in ratios:
        if r.profile is not None:
            what = "with rings" if r.rings else "without rings"
            lines += ["", f"Where epochgate's seconds went, {r.rows:,} rows/epoch {what}:", ""]
            lines += profile_lines(r.profile)
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, help="rows per epoch at scale (default: the size's)")
    parser.add_argument("--epochs", type=int, help="epochs per comparison (default: the size's)")
    parser.add_argument("--spark", default=None, help="Spark master (default local[2])")
    parser.add_argument("--profile", action="store_true", help="where epochgate's seconds go")
    parser.add_argument(
        "--materialized", action="store_true", help="write the validations' output too"
    )
    parser.add_argument(
        "--partial", action="store_true", help="balances partial, as the bank example has it"
    )
    parser.add_argument("--results", type=Path, default=BENCH / "RESULTS.md")
    args = parser.parse_args(argv)
    name = os.environ.get("BENCH_SIZE", "fast")
    if name not in SIZES:
        sys.exit(f"BENCH_SIZE must be one of {', '.join(SIZES)}, not {name!r}")
    size = SIZES[name]
    size = Size(size.small, args.rows or size.large, args.epochs or size.epochs, size.accounts)
    print(f"overhead ({name}: {size})", flush=True)
    spark = spark_session(args.spark)
    quiet(spark)
    with scratch("bench-overhead-") as tmp:
        ratios = run(
            size,
            spark,
            Path(tmp),
            profile=args.profile,
            materialize=args.materialized,
            partial=args.partial,
        )
    write_section(args.results, "bench_overhead", section(ratios, size.epochs))
    print(f"written: {args.results}")


if __name__ == "__main__":
    main()
