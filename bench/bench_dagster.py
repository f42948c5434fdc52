"""Dagster vs ``epochgate run`` on the bank pipeline; the frontier sensor's tick on a long ledger;
epochs under the real Dagster daemon.

    .venv/bin/python bench/bench_dagster.py [--part a|b|c|all]
        [--rows 1000000] [--epochs 3] [--warmup 2] [--accounts 100000] [--no-rings]
        [--spark sc://HOST:PORT] [--tick-epochs 1000] [--tick-stages 20] [--ticks 30] [--profile]
        [--interval 5] [--daemon-rows 2000] [--daemon-epochs 3] [--daemon-warmup 1]
        [--launchers default,warm] [--results bench/RESULTS.md]

Part A, per epoch: the same seeded bank inputs go to two ledgers, each with its own data
directory, and both sides use one Spark Connect server (``local[2]``) that this benchmark starts
on a free 127.0.0.1 port and stops at the end (or the running server ``--spark`` names). Side
"run" sends an epoch through the input handles and times ``Runtime.run()``, as ``epochgate run``
does. Side "Dagster" sends the same epoch and times ``Driver.drive()``: frontier sensor ticks
and the runs they request, executed in process on a Dagster instance in a temporary directory
(SQLite storage, the project's ``dagster.yaml``), until the sensor skips. Sending is not timed
on either side. The sides take turns going first, epoch by epoch; the first ``--warmup`` epochs
are shown but not counted (the server's JVM is still warming up in them: epoch times keep
falling for two or three epochs). Afterwards every stage must have run every epoch on both
sides, with the same row count and row checksum. Prints each epoch's times and ratio, then the
median of the per-epoch ratios (goal <= 1.3 at 1M rows per epoch) and Dagster's extra seconds
per epoch (a Dagster run costs about the same whatever the data's size).

Part B, the sensor's tick: a synthetic pipeline of ``--tick-stages`` stages (layers of four
behind two sources; Spark never runs) with ``--tick-epochs`` epochs in its ledger, committed as
stage runs commit them: sends and advances of every worker, then per stage and epoch a run
record and one commit holding its progress batch, its message and the messages it read (about
0.2 s per epoch: filling 1,000 epochs takes most of this part's time). The last epochs are not
finished: two ran half their stages (the first of them has ready stages, the second waits for
it) and in the final one a source worker still holds the epoch, so a tick finds work and
waiting epochs. The Dagster instance holds a finished run per done epoch and one run still in
flight, and after a first tick every epoch's partition. Prints the median and p90 of
``--ticks`` sensor evaluations (goal < 200 ms) and of their parts, timed in turns with them:
opening the ledger, ``read_tick`` (and ``ledger.status`` in it), ``in_flight_stages`` and the
instance's partitions.

Part C, the daemon path (``bench/daemon_path.py``): epochs under ``dagster dev`` with Dagster's
default run launcher and with the project's warm one, against ``epochgate run`` on the same
Spark Connect server; where a run's seconds go; the goal (sensor interval + 1.5x the direct
time). It writes the ``bench_dagster`` section of ``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, redirect_stderr
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import daemon_path
import dagster as dg
from pyspark.sql import functions as F
from pyspark.sql import types as T
from results_file import section, spread, write_section

from dagster_project.definitions import build_definitions
from dagster_project.demo import INSTANCE_CONFIG
from dagster_project.driver import DriveError, Driver
from dagster_project.names import (
    EPOCH_TAG,
    PARTITION_TAG,
    PIPELINE_TAG,
    STAGES_TAG,
    job_name,
    stage_key,
)
from dagster_project.partitions import epoch_key, partitions_name
from dagster_project.resources import LedgerResource, SparkResource
from dagster_project.sensors import in_flight_stages, read_tick
from pipelines import connect_server
from pipelines.dataflow import Pipeline, Stage, Stream
from pipelines.examples import bank
from pipelines.examples.bank_data import DemoData, generate
from pipelines.examples.sizes import positive
from pipelines.runtime import Runtime, run_key
from pipelines.settings import HOME_ENV
from progress import Tracker
from progress.ledger import Ledger, MessageEntry, MessageRef, Origin

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

RATIO_GOAL = 1.3
GOAL_ROWS = 1_000_000
TICK_GOAL_MS = 200.0


# -- shared ----------------------------------------------------------------------------------


@contextmanager
def dagster_instance(directory: Path) -> Iterator[dg.DagsterInstance]:
    """A persistent instance (SQLite storage) in ``directory``, with the project's settings."""
    directory.mkdir(parents=True)
    shutil.copyfile(INSTANCE_CONFIG, directory / "dagster.yaml")
    with dg.DagsterInstance.from_config(str(directory)) as instance:
        yield instance


def non_negative(text: str) -> int:
    """An argparse type: an integer of at least 0."""
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be at least 0, got {value}")
    return value


def percentile(xs: list[float], q: float) -> float:
    ordered = sorted(xs)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def ms_line(label: str, xs: list[float], goal: str = "") -> str:
    median, p90 = statistics.median(xs) * 1000, percentile(xs, 0.9) * 1000
    return f"  {label:<46} median {median:7.1f} ms  p90 {p90:7.1f} ms{goal}"


# -- part A: one epoch of bank, through Dagster and through `epochgate run` -----------------


def send_all(rt: Runtime, data: DemoData, epoch: int) -> None:
    """Every worker of every source sends its files for ``epoch`` and advances past it."""
    for source, workers in bank.WORKERS.items():
        for w in range(workers):
            for path in data.files(source, epoch, w):
                rt.input(source, w).send(path)
            rt.input(source, w).advance_to(epoch + 1)


@dataclass
class Side:
    """One way of running the bank pipeline: the runtime its inputs are sent through, the
    timed work of one epoch (returning a note on what it did), and its times."""

    name: str
    rt: Runtime
    work: Callable[[], str]
    seconds: list[float] = field(default_factory=list)

    def epoch(self, data: DemoData, epoch: int) -> str:
        send_all(self.rt, data, epoch)
        started = time.perf_counter()
        note = self.work()
        self.seconds.append(time.perf_counter() - started)
        return note


def run_side(rt: Runtime) -> Side:
    def work() -> str:
        return f"{len(rt.run())} stage runs"

    return Side("run", rt, work)


def dagster_side(rt: Runtime, driver: Driver) -> Side:
    def work() -> str:
        before = len(driver.runs)
        log = io.StringIO()  # each tick logs the epochs that wait: shown only if a run fails
        started = time.perf_counter()
        try:
            with redirect_stderr(log):
                driver.drive()
        except DriveError:
            sys.stderr.write(log.getvalue())
            raise
        took = time.perf_counter() - started
        runs = driver.runs[before:]
        in_runs = sum(r.seconds for r in runs)
        return f"{len(runs)} runs {in_runs:.1f}s, ticks and the rest {took - in_runs:.2f}s"

    return Side("Dagster", rt, work)


Fingerprint = tuple[int, int, int]
"""Of one stage at one epoch: rows in the ledger, rows read back, and a checksum of the rows."""


def fingerprints(rt: Runtime, epochs: int) -> dict[tuple[str, int], Fingerprint]:
    """Every stage's output at every epoch, as the ledger catalogs it and as Spark reads it
    back (an order-free checksum: the sum of the rows' 64-bit hashes modulo 2**31)."""
    p = rt.pipeline.name
    out: dict[tuple[str, int], Fingerprint] = {}
    for stage in rt.pipeline.stages.values():
        if stage.is_source:
            continue
        done = set(rt.ledger.done_epochs(p, stage.name))
        for epoch in range(epochs):
            if epoch not in done:
                raise SystemExit(f"{p}: stage {stage.name} did not run epoch {epoch}")
            catalogued = sum(m.rows for m in rt.ledger.message(p, stage.name, 0, epoch))
            df = rt.read(stage.name, epoch)
            row = df.agg(
                F.count(F.lit(1)),
                F.coalesce(F.sum(F.pmod(F.xxhash64(*df.columns), F.lit(2**31))), F.lit(0)),
            ).first()
            assert row is not None
            out[stage.name, epoch] = (catalogued, int(row[0]), int(row[1]))
    return out


def compare(a: Side, b: Side, epochs: int) -> int:
    """Raise naming the first difference between the two sides' outputs; the outputs compared."""
    fa, fb = fingerprints(a.rt, epochs), fingerprints(b.rt, epochs)
    for key, found in fa.items():
        if fb.get(key) != found:
            stage, epoch = key
            raise SystemExit(
                f"outputs differ at {stage} epoch {epoch}: {a.name} {found} "
                f"(ledger rows, rows, checksum), {b.name} {fb.get(key)}"
            )
    return len(fa)


def bench_bank(args: argparse.Namespace, root: Path, spark: SparkSession, url: str) -> list[str]:
    """Part A's epochs; the lines of its results section."""
    total = args.warmup + args.epochs
    started = time.perf_counter()
    data = generate(root / "inputs", epochs=total, rows=args.rows, accounts=args.accounts, seed=1)
    print(
        f"generated {total} epochs x {args.rows:,} rows ({args.accounts:,} accounts) in "
        f"{time.perf_counter() - started:.0f}s",
        flush=True,
    )
    rings = not args.no_rings

    here = root / "run"
    run = run_side(
        Runtime(bank.pipeline(rings=rings), Ledger(here / "ledger.duckdb"), spark, here / "data")
    )
    here = root / "dagster"
    ledger = LedgerResource(path=str(here / "ledger.duckdb"), data_dir=str(here / "data"))
    defs = build_definitions(
        [bank.pipeline(rings=rings)], spark=SparkResource(master=url), ledger=ledger
    )
    with dagster_instance(root / "dagster-home") as instance:
        driver = Driver(defs, instance)
        sources = Runtime(bank.pipeline(rings=rings), ledger.ledger(), spark, ledger.data_root)
        dagster = dagster_side(sources, driver)

        what = "bank" if rings else "bank without rings"
        print(f"{what}, {args.rows:,} rows per epoch, Spark Connect at {url}: seconds per epoch")
        ratios: list[float] = []
        for epoch in range(total):
            order = (run, dagster) if epoch % 2 == 0 else (dagster, run)
            notes = {side.name: side.epoch(data, epoch) for side in order}
            r, d = run.seconds[-1], dagster.seconds[-1]
            counted = epoch >= args.warmup
            if counted:
                ratios.append(d / r)
            label = f"epoch {epoch}" + ("" if counted else " (warm-up)")
            print(
                f"  {label:<18} {order[0].name} first:  run {r:6.1f}s ({notes['run']}),  "
                f"Dagster {d:6.1f}s ({notes['Dagster']})  ratio {d / r:.2f}",
                flush=True,
            )
        print("checking both sides' outputs (row counts and checksums)", flush=True)
        checked = compare(run, dagster, total)
    stages = sum(not s.is_source for s in run.rt.pipeline.stages.values())
    print(f"  same outputs: {checked} (stage, epoch) pairs, {stages} stages x {total} epochs")

    rs, ds = run.seconds[args.warmup :], dagster.seconds[args.warmup :]
    median = statistics.median(ratios)
    print(
        f"median of {len(ratios)} epochs: run {statistics.median(rs):.1f}s, Dagster "
        f"{statistics.median(ds):.1f}s; per-epoch ratios "
        f"{', '.join(f'{x:.2f}' for x in ratios)}"
    )
    extra = statistics.median(d - r for r, d in zip(rs, ds, strict=True))
    runs = len(driver.runs) / total
    print(
        f"Dagster's extra time per epoch: median {extra:.1f}s over {runs:.0f} runs per epoch "
        f"({extra / runs:.2f}s per run, ticks included)"
    )
    if args.rows == GOAL_ROWS:
        verdict = "met" if median <= RATIO_GOAL else "NOT met"
    else:
        verdict = f"the goal is for {GOAL_ROWS:,} rows per epoch; this run used {args.rows:,}"
    print(f"median ratio Dagster / run: {median:.2f}  (goal <= {RATIO_GOAL}: {verdict})")
    return [
        f"{what}, {args.rows:,} rows per epoch, one Spark Connect server: `epochgate run` "
        f"{spread(rs)}, Dagster {spread(ds)} per epoch",
        f"Dagster's extra time per epoch: median {extra:.1f}s ({runs:.0f} runs per epoch)",
        f"median of the per-epoch ratios Dagster / run: {median:.2f} "
        f"(goal <= {RATIO_GOAL}: {verdict})",
    ]


def part_a(args: argparse.Namespace) -> list[str]:
    with tempfile.TemporaryDirectory(prefix="bench-dagster-") as tmp:
        root = Path(tmp)
        if args.spark is None:
            os.environ[HOME_ENV] = str(root / "home")  # the server's pid file and log
        with connect_server.connect_session(args.spark, timeout=120) as connected:
            if connected.start_seconds is not None:
                print(f"Spark Connect server (local[2]) started in {connected.start_seconds:.0f}s")
            return bench_bank(args, root, connected.spark, connected.url)


# -- part B: the frontier sensor's tick over a long ledger ----------------------------------

TICK_PIPELINE = "wide"
WIDTH = 4
"""Stages per layer of the synthetic pipeline."""
ROWS = T.StructType([T.StructField("key", T.LongType()), T.StructField("value", T.LongType())])
SOURCES = {"src_a": 2, "src_b": 1}
"""The synthetic pipeline's sources and their workers."""
HELD = ("src_a", SOURCES["src_a"] - 1)
"""The worker that still holds the last epoch."""
PARTIAL = 2
"""Epochs before the held one that ran only half their stages."""
EPOCHS_PER_TRANSACTION = 10


def never_runs(df: DataFrame) -> DataFrame:
    """A stage function the tick benchmark never calls: it commits progress without Spark."""
    raise AssertionError("the tick benchmark runs no stage")


def wide_pipeline(stages: int) -> Pipeline:
    """``stages`` stages in layers of ``WIDTH``: the first layer reads the two sources, each
    later stage the stage above it, and the first of each later layer joins two of them."""
    p = Pipeline(TICK_PIPELINE)
    a, b = (p.source(name, schema=ROWS, workers=n) for name, n in SOURCES.items())
    made: list[Stream] = []
    for i in range(stages):
        name, layer, column = f"s{i:02d}", i // WIDTH, i % WIDTH
        if layer == 0:
            made.append(p.transform(name, a if column % 2 == 0 else b, fn=never_runs))
        elif column == 0:
            above = made[(layer - 1) * WIDTH : layer * WIDTH]
            made.append(p.join(name, above[0], above[-1], on=["key"]))
        else:
            made.append(p.transform(name, made[i - WIDTH], fn=never_runs))
    return p


def run_order(pipeline: Pipeline) -> list[Stage]:
    depths = pipeline.graph().depths()
    runs = [s for s in pipeline.stages.values() if not s.is_source]
    return sorted(runs, key=lambda s: (depths[s.name], s.name))


def attempts(stage: str, epoch: int) -> list[str]:
    """The attempts of the messages ``stage`` (a source: each of its workers) has at ``epoch``."""
    if stage in SOURCES:
        return [f"{stage}.{epoch}.{w}" for w in range(SOURCES[stage])]
    return [f"{stage}.{epoch}"]


def commit_stage(  # noqa: PLR0917 (a run's coordinates)
    ledger: Ledger, tracker: Tracker, p: str, stage: Stage, epoch: int, data: Path
) -> None:
    """What a successful run of ``stage`` at ``epoch`` leaves in the ledger: its run record
    and one commit of its progress batch, its output message and the messages it read.
    ``tracker`` follows the ledger's counts (the batch is applied to it too)."""
    (attempt,) = attempts(stage.name, epoch)
    run_id = ledger.start_run(p, stage.name, epoch, attempt)
    reads = tuple(
        MessageRef(upstream, 0, epoch, a)
        for upstream in stage.inputs
        for a in attempts(upstream, epoch)
    )
    path = data / p / stage.name / "port=0" / f"epoch={epoch}" / f"attempt={attempt}"
    message = MessageEntry(
        stage.name, 0, epoch, attempt, str(path), 1000, 65_536, False, epoch, reads
    )
    batch = tracker.stage_batch(stage.name, epoch)
    tracker.apply(batch)
    result = ledger.commit(
        p,
        batch,
        key=run_key(stage.name, epoch),
        messages=[message],
        origin=Origin.stage(stage.name, epoch),
    )
    ledger.finish_run(run_id, "succeeded", batch_id=result.batch_id)


def fill_ledger(ledger: Ledger, pipeline: Pipeline, epochs: int, data: Path) -> None:
    """Every epoch's sends, advances and stage runs, a few epochs per transaction; the last
    epochs unfinished (see the module docs)."""
    p = pipeline.name
    ledger.register(p, pipeline.graph())
    order = run_order(pipeline)
    started = shown = time.perf_counter()
    for first in range(0, epochs, EPOCHS_PER_TRANSACTION):
        with ledger.atomic():
            for epoch in range(first, min(first + EPOCHS_PER_TRANSACTION, epochs)):
                for source in SOURCES:
                    for w, attempt in enumerate(attempts(source, epoch)):
                        path = data / p / source / "port=0" / f"epoch={epoch}" / attempt
                        ledger.send(
                            p, source, w, MessageEntry(source, 0, epoch, attempt, str(path))
                        )
                        if epoch < epochs - 1 or (source, w) != HELD:
                            ledger.advance(p, source, w, epoch + 1)
                if epoch == epochs - 1:
                    continue
                tracker = ledger.tracker(p)
                todo = order[: len(order) // 2] if epoch >= epochs - 1 - PARTIAL else order
                for stage in todo:
                    commit_stage(ledger, tracker, p, stage, epoch, data)
        if time.perf_counter() - shown > 10:
            shown = time.perf_counter()
            done = min(first + EPOCHS_PER_TRANSACTION, epochs)
            print(f"  ... ledger: {done:,}/{epochs:,} epochs committed", flush=True)
    took = time.perf_counter() - started
    print(f"  ledger filled in {took:.0f}s ({took / epochs * 1000:.0f} ms per epoch)")


def fill_instance(instance: dg.DagsterInstance, pipeline: Pipeline, epochs: int) -> None:
    """A finished run per done epoch, and a run in flight at the first unfinished epoch for
    one of the stages that is ready there (the tick leaves it out)."""
    p = pipeline.name
    order = run_order(pipeline)

    def add(epoch: int, stages: list[Stage], status: dg.DagsterRunStatus) -> None:
        instance.add_run(
            dg.DagsterRun(
                job_name=job_name(p),
                run_id=str(uuid.uuid4()),
                status=status,
                asset_selection=frozenset(stage_key(p, s.name) for s in stages),
                tags={PARTITION_TAG: epoch_key(epoch), PIPELINE_TAG: p, EPOCH_TAG: str(epoch)},
            )
        )

    for epoch in range(epochs - 1 - PARTIAL):
        add(epoch, order, dg.DagsterRunStatus.SUCCESS)
    add(epochs - 1 - PARTIAL, [order[len(order) // 2]], dg.DagsterRunStatus.STARTED)


def silent_tick(driver: Driver) -> dg.SensorResult:
    """One tick, its log lines (the sensor logs each waiting epoch, as under the daemon)
    written to memory rather than to the terminal."""
    with redirect_stderr(io.StringIO()):
        return driver.tick()


TICK = "sensor tick (Driver.tick)"
OPEN = "  open the ledger (a new Ledger: pipelines())"
READ = "  read_tick (status, planned work, digests)"
STATUS = "    of which ledger.status (measured alone)"
RUNS = "  in_flight_stages (the instance's runs)"
PARTITIONS = "  get_dynamic_partitions (the instance)"


def tick_timings(
    n: int, driver: Driver, pipeline: Pipeline, ledger: LedgerResource
) -> dict[str, list[float]]:
    """``n`` ticks and ``n`` calls of each part of one, in turns (a tick, then each part, then
    again) so that noise on the machine hits them alike. The parts run as the sensor runs
    them: a new ``Ledger`` each tick, whose first session (``pipelines()``) opens the file."""
    p, instance = pipeline.name, driver.instance
    in_flight = in_flight_stages(instance, pipeline)
    out: dict[str, list[float]] = {k: [] for k in (TICK, OPEN, READ, STATUS, RUNS, PARTITIONS)}

    def clock(label: str, call: Callable[[], object]) -> None:
        started = time.perf_counter()
        call()
        out[label].append(time.perf_counter() - started)

    for _ in range(n):
        clock(TICK, lambda: silent_tick(driver))
        book = ledger.ledger()
        clock(OPEN, book.pipelines)
        clock(READ, partial(read_tick, book, pipeline, in_flight))
        clock(STATUS, partial(book.status, p))
        clock(RUNS, lambda: in_flight_stages(instance, pipeline))
        clock(PARTITIONS, lambda: instance.get_dynamic_partitions(partitions_name(p)))
    return out


def first_ticks(driver: Driver, pipeline: Pipeline, ledger: LedgerResource) -> None:
    """The first tick (it adds every epoch's partition), then what each later tick finds."""
    p = pipeline.name
    started = time.perf_counter()
    silent_tick(driver)
    took = time.perf_counter() - started
    partitions = len(driver.instance.get_dynamic_partitions(partitions_name(p)))
    print(f"  first tick {took * 1000:.0f} ms: it added {partitions:,} partitions")
    result = silent_tick(driver)
    requests = [
        f"epoch {r.tags[EPOCH_TAG]} ({r.tags[STAGES_TAG]})" for r in result.run_requests or ()
    ]
    print(f"  each later tick requests: {'; '.join(requests) or 'nothing'}")
    tick = read_tick(ledger.ledger(), pipeline, in_flight_stages(driver.instance, pipeline))
    for epoch, stages in sorted(tick.in_flight.items()):
        print(f"    leaves out, in flight: epoch {epoch} ({', '.join(stages)})")
    for line in tick.waiting_lines():
        print(f"    and reports: {line}")


def part_b(args: argparse.Namespace) -> list[str]:
    if args.tick_epochs < PARTIAL + 2 or args.tick_stages < 2:
        raise SystemExit(f"part b needs --tick-epochs >= {PARTIAL + 2} and --tick-stages >= 2")
    pipeline = wide_pipeline(args.tick_stages)
    p, epochs = pipeline.name, args.tick_epochs
    print(
        f"frontier sensor: {args.tick_stages} stages (+{len(SOURCES)} sources), "
        f"{epochs:,} epochs in the ledger",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="bench-dagster-tick-") as tmp:
        root = Path(tmp)
        path = root / "ledger.duckdb"
        fill_ledger(Ledger(path), pipeline, epochs, root / "data")
        print(f"  ledger file {path.stat().st_size / 2**20:.1f} MiB")
        ledger = LedgerResource(path=str(path), data_dir=str(root / "data"))
        defs = build_definitions([pipeline], ledger=ledger, spark=SparkResource())
        with dagster_instance(root / "dagster-home") as instance:
            started = time.perf_counter()
            fill_instance(instance, pipeline, epochs)
            runs = len(instance.get_run_ids())
            print(f"  {runs:,} runs added to the instance in {time.perf_counter() - started:.0f}s")
            driver = Driver(defs, instance, pipeline=p)
            first_ticks(driver, pipeline, ledger)
            timings = tick_timings(args.ticks, driver, pipeline, ledger)
            ticks = timings[TICK]
            median = statistics.median(ticks) * 1000
            verdict = "met" if median < TICK_GOAL_MS else "NOT met"
            print(f"{args.ticks} ticks and {args.ticks} calls of each part, in turns:")
            for label, xs in timings.items():
                goal = f"  (goal < {TICK_GOAL_MS:.0f} ms: {verdict})" if xs is ticks else ""
                print(ms_line(label, xs, goal))
            parts = sum(statistics.median(timings[k]) for k in (OPEN, READ, RUNS, PARTITIONS))
            rest = median - parts * 1000
            print(f"  the rest (Dagster: context, resources, run requests): about {rest:.0f} ms")
            if args.profile:
                profile(driver, args.ticks)
    ms = [t * 1000 for t in ticks]
    return [
        f"frontier sensor tick, {args.tick_stages} stages x {epochs:,} epochs in the ledger, "
        f"{runs:,} runs in the instance: {spread(ms, ' ms', 1)} (goal < {TICK_GOAL_MS:.0f} ms: "
        f"{verdict})"
    ]


def profile(driver: Driver, n: int) -> None:
    """The functions the ticks spend their time in, by cumulative time."""
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(n):
        silent_tick(driver)
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(30)
    print(f"cProfile of {n} ticks, by cumulative time:")
    print(out.getvalue())


def runs_section(lines: list[str]) -> str:
    """Parts A and B's section of the results file (part C writes its own)."""
    return section(
        "bench_dagster, parts A and B: Dagster against `epochgate run`; the sensor's tick",
        [
            "part A: the same epochs of `bank` through Dagster (in-process runs on a Dagster "
            "instance, requested by the frontier sensor) and through `Runtime.run()`, sides in "
            "turn; per-epoch medians after the warm-up epochs (spread: fastest to slowest)",
            "part B: sensor ticks over a synthetic pipeline's long ledger, in turns with their "
            "parts (spread: fastest to slowest tick)",
        ],
        lines,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=["a", "b", "c", "all"], default="all")
    parser.add_argument("--rows", type=positive, default=GOAL_ROWS, help="rows per epoch (a)")
    parser.add_argument("--epochs", type=positive, default=3, help="epochs counted (a)")
    parser.add_argument(
        "--warmup", type=non_negative, default=2, help="epochs run first, not counted (a)"
    )
    parser.add_argument("--accounts", type=positive, default=100_000, help="accounts (a)")
    parser.add_argument(
        "--no-rings", action="store_true", help="leave the iterative stage out on both sides"
    )
    parser.add_argument(
        "--spark", default=None, help="a running Spark Connect server (default: start one)"
    )
    parser.add_argument("--tick-epochs", type=positive, default=1000, help="epochs (b)")
    parser.add_argument("--tick-stages", type=positive, default=20, help="stages (b)")
    parser.add_argument("--ticks", type=positive, default=30, help="ticks timed (b)")
    parser.add_argument("--profile", action="store_true", help="cProfile the ticks (b)")
    daemon_path.add_options(parser)
    args = parser.parse_args()
    started = time.perf_counter()
    lines: list[str] = []
    if args.part in ("a", "all"):
        lines += part_a(args)
    if args.part in ("b", "all"):
        lines += part_b(args)
    if lines:
        write_section(args.results, "bench_dagster_runs", runs_section(lines))
    if args.part in ("c", "all"):
        daemon_path.part_c(args)
    print(f"wall time {time.perf_counter() - started:.0f}s")


if __name__ == "__main__":
    main()
