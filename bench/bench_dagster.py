"""Dagster vs ``epochgate run`` on the bank pipeline; the frontier sensor's tick on a long ledger;
epochs under the real Dagster daemon.

    .venv/bin/python bench/bench_dagster.py              # BENCH_SIZE=fast unless set
    BENCH_SIZE=full .venv/bin/python bench/bench_dagster.py [--part a|b|c|all]
        [--rows 1000000] [--epochs 3] [--warmup 2] [--accounts 100000] [--no-rings]
        [--spark sc://HOST:PORT|sail] [--tick-epochs 1000] [--tick-stages 20] [--ticks 30]
        [--profile]
        [--interval 5] [--daemon-rows 2000] [--daemon-epochs 3] [--daemon-warmup 1]
        [--launchers default,warm] [--results bench/RESULTS.md]

The defaults shown are the full sizes (``BENCH_SIZE=full``), those the goals are set for; the
fast form (``SIZES["fast"]``) runs 20,000 rows per epoch in part A, 100 epochs of 8 stages in
part B and one epoch per launcher in part C. Options given on the command line win.

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

Part B, the sensor's tick (``bench/sensor_tick.py``): a synthetic pipeline of ``--tick-stages``
stages (layers of four behind two sources; Spark never runs) with ``--tick-epochs`` epochs in its
ledger, committed as stage runs commit them: sends and advances of every worker, then per stage and
epoch a run record and one commit holding its progress batch, its message and the messages it read
(about 0.2 s per epoch: filling 1,000 epochs takes most of this part's time). The last epochs are
not finished: two ran half their stages (the first of them has ready stages, the second waits for
it) and in the final one a source worker still holds the epoch, so a tick finds work and waiting
epochs. The Dagster instance holds a finished run per done epoch and one run still in flight, and
after a first tick every epoch's partition. Prints the median and p90 of ``--ticks`` sensor
evaluations (goal < 200 ms) and of their parts, timed in turns with them: opening the ledger,
``read_tick`` (and ``ledger.status`` in it), ``in_flight_stages`` and the instance's partitions.

Part C, the daemon path (``bench/daemon_path.py``): epochs under ``dagster dev`` with Dagster's
default run launcher and with the project's warm one, against ``epochgate run`` on the same
Spark Connect server; where a run's seconds go; the goal (sensor interval + 1.5x the direct
time). It writes the ``bench_dagster`` section of ``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from contextlib import redirect_stderr
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import daemon_path
from pyspark.sql import functions as F
from results_file import chosen_size, section, spread, write_section
from scratch import scratch
from sensor_tick import dagster_instance, part_b

from dagster_project.definitions import build_definitions
from dagster_project.dev.driver import DriveError, Driver
from dagster_project.resources import LedgerResource, SparkResource
from pipelines.examples import bank
from pipelines.examples.bank_data import DemoData, generate
from pipelines.examples.sizes import positive
from pipelines.run.runtime import Runtime
from pipelines.settings import HOME_ENV
from pipelines.spark import connect_server
from progress.ledger import Ledger

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

RATIO_GOAL = 1.3
GOAL_ROWS = 1_000_000
SIZES: dict[str, dict[str, object]] = {
    "fast": {
        "rows": 20_000,
        "epochs": 2,
        "warmup": 1,
        "accounts": 2_000,
        "tick_epochs": 100,
        "tick_stages": 8,
        "ticks": 10,
        "daemon_epochs": 1,
    },
    "full": {},  # the options' own defaults: the sizes the goals are set for
}
"""The options' defaults at each ``BENCH_SIZE`` (options given on the command line win)."""


# -- shared ----------------------------------------------------------------------------------


def non_negative(text: str) -> int:
    """An argparse type: an integer of at least 0."""
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be at least 0, got {value}")
    return value


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
    with scratch("bench-dagster-") as tmp:
        root = Path(tmp)
        if args.spark is None:
            os.environ[HOME_ENV] = str(root / "home")  # the server's pid file and log
        with connect_server.connect_session(args.spark, timeout=120) as connected:
            if connected.start_seconds is not None:
                print(f"Spark Connect server (local[2]) started in {connected.start_seconds:.0f}s")
            return bench_bank(args, root, connected.spark, connected.url)


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


def options(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line, with the defaults of the size ``BENCH_SIZE`` names (``SIZES``)."""
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
        "--spark",
        default=None,
        help="a running Spark Connect server (default: start one); part C also takes sail",
    )
    parser.add_argument("--tick-epochs", type=positive, default=1000, help="epochs (b)")
    parser.add_argument("--tick-stages", type=positive, default=20, help="stages (b)")
    parser.add_argument("--ticks", type=positive, default=30, help="ticks timed (b)")
    parser.add_argument("--profile", action="store_true", help="cProfile the ticks (b)")
    daemon_path.add_options(parser)
    name, defaults = chosen_size(SIZES)
    parser.set_defaults(**defaults, size=name)
    return parser.parse_args(argv)


def main() -> None:
    args = options()
    print(f"bench_dagster ({args.size})", flush=True)
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
