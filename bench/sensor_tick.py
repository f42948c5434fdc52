"""Part B of the Dagster bench (``bench_dagster.py --part b``): the frontier sensor's tick over
a long ledger, and its parts timed in turns with it (see ``bench_dagster.py``'s docs); and
``dagster_instance``, the Dagster instance every part of that bench runs on.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import shutil
import statistics
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, redirect_stderr
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import dagster as dg
from pyspark.sql import types as T
from results_file import spread
from scratch import scratch

from dagster_project.definitions import build_definitions
from dagster_project.dev.driver import Driver
from dagster_project.dev.instance import INSTANCE_CONFIG
from dagster_project.in_flight import in_flight_stages
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
from dagster_project.sensors import read_tick
from pipelines.run.runtime import run_key
from pipelines.stages.pipeline import Pipeline, Stage, Stream
from progress import Tracker
from progress.ledger import Ledger, MessageEntry, MessageRef, Origin
from progress.run_status import RunStatus

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

TICK_GOAL_MS = 200.0


@contextmanager
def dagster_instance(directory: Path) -> Iterator[dg.DagsterInstance]:
    """A persistent instance (SQLite storage) in ``directory``, with the project's settings."""
    directory.mkdir(parents=True)
    shutil.copyfile(INSTANCE_CONFIG, directory / "dagster.yaml")
    with dg.DagsterInstance.from_config(str(directory)) as instance:
        yield instance


def percentile(xs: list[float], q: float) -> float:
    ordered = sorted(xs)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def ms_line(label: str, xs: list[float], goal: str = "") -> str:
    median, p90 = statistics.median(xs) * 1000, percentile(xs, 0.9) * 1000
    return f"  {label:<46} median {median:7.1f} ms  p90 {p90:7.1f} ms{goal}"


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
    ledger.finish_run(run_id, RunStatus.SUCCEEDED, batch_id=result.batch_id)


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
    with scratch("bench-dagster-tick-") as tmp:
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
