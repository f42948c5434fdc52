"""Part C of ``bench_dagster.py``: epochs of ``bank`` under the real Dagster daemon.

For each run launcher (Dagster's default: a process per run; the project's ``WarmRunLauncher``)
a ``dagster dev`` on the project's workspace, with an instance directory of its own holding the
project's ``dagster.yaml`` (without its ``run_launcher`` for the default one), a state directory
of its own, ``EPOCHGATE_SENSOR_INTERVAL`` and ``EPOCHGATE_SPARK`` set: the same Spark master
for every side. Each epoch's inputs are sent and every worker advances; the clock starts at the
last advance and stops when the ledger has every stage of the epoch done.
The end of an epoch is when its last stage run finished, as the ledger recorded it (asked
once the epoch's Dagster runs have ended, so polling never contends with their commits). Then
the direct side: the same epochs through ``Runtime.run()`` (what ``epochgate run`` does),
timed from the last advance too. The first ``warmup`` epochs of each side are not counted.

Printed per side: each epoch's seconds and the median; for the daemon sides, where the seconds
of an epoch go (medians over the counted epochs): the sensor (last advance to the first run
queued) and the parts of its runs (``dagster_project.dev.run_timeline``). Then the goal: at most
the sensor interval + 1.5x the direct time, met or not.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC
from pathlib import Path
from typing import TYPE_CHECKING

import dagster as dg
import yaml
from results_file import about_this_run, write_section
from scratch import scratch

from dagster_project.dev import server as dev_server
from dagster_project.dev.instance import INSTANCE_CONFIG
from dagster_project.dev.run_timeline import Timeline, run_timeline
from dagster_project.names import EPOCH_TAG
from pipelines.examples import bank
from pipelines.examples.bank_data import DemoData, Oracle, generate
from pipelines.examples.demo import verify_outputs
from pipelines.run.runtime import Runtime
from pipelines.settings import HOME_ENV
from pipelines.spark import connect_server, sail
from pipelines.spark.connect_token import TOKEN_ENV, read_token
from pipelines.spark.engine import SAIL, engine_of
from pipelines.spark.session import SAIL_ENGINES, connect_address, spark_session
from progress.ledger import Ledger

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
LAUNCHERS = ("default", "warm")
STAGES = [name for name, stage in bank.pipeline().stages.items() if not stage.is_source]
DIRECT_FACTOR = 1.5
SENSOR = "sensor (last advance to the first run queued)"
AFTER = "the rest (< 0: the runs end after their last commit)"


@dataclass
class DaemonEpoch:
    seconds: float
    parts: dict[str, float]
    runs: int


@dataclass
class Measured:
    """One side's epochs: seconds from the last advance to every stage done."""

    name: str
    epochs: list[DaemonEpoch] = field(default_factory=list)

    def counted(self, warmup: int) -> list[DaemonEpoch]:
        return self.epochs[warmup:]

    def median(self, warmup: int) -> float:
        return statistics.median(e.seconds for e in self.counted(warmup))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def send_epoch(rt: Runtime, data: DemoData, epoch: int) -> float:
    """Every worker sends its files for ``epoch``, then every worker advances; returns the time
    of the last advance."""
    for source, workers in bank.WORKERS.items():
        for w in range(workers):
            for path in data.files(source, epoch, w):
                rt.input(source, w).send(path)
    for source, workers in bank.WORKERS.items():
        for w in range(workers):
            rt.input(source, w).advance_to(epoch + 1)
    return time.time()


def all_done(ledger: Ledger, epoch: int) -> bool:
    status = {s.stage: s.done for s in ledger.status("bank") if not s.is_input}
    return all(epoch in status[stage] for stage in STAGES)


def runs_idle(instance: dg.DagsterInstance, epoch: int) -> bool:
    """Whether the epoch has runs and none of them is queued or running (cheap to ask often:
    the ledger is asked only then, so polling does not contend with the runs' commits)."""
    runs = instance.get_runs(dg.RunsFilter(tags={EPOCH_TAG: str(epoch)}))
    return bool(runs) and all(r.is_finished for r in runs)


def committed_at(ledger: Ledger, epoch: int) -> float:
    """When the last stage run of ``epoch`` finished, as the ledger recorded it (Unix time)."""
    last = max(
        r.finished_at
        for stage in STAGES
        for r in ledger.history("bank", stage, epoch).runs
        if r.status == "succeeded" and r.finished_at is not None
    )
    return last.replace(tzinfo=UTC).timestamp() if last.tzinfo is None else last.timestamp()


def instance_dir(root: Path, launcher: str) -> Path:
    """An instance directory with the project's settings, less its launcher for ``default``."""
    home = root / f"dagster-{launcher}"
    home.mkdir(parents=True)
    settings = yaml.safe_load(INSTANCE_CONFIG.read_text())
    if launcher == "default":
        settings.pop("run_launcher")
    (home / "dagster.yaml").write_text(yaml.safe_dump(settings))
    return home


# -- the sides ---------------------------------------------------------------------------------


def wait_for(check: Callable[[], bool], what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit(f"{what}: not after {timeout:.0f}s")
        time.sleep(0.2)


def epoch_parts(
    instance: dg.DagsterInstance, epoch: int, advanced: float, took: float
) -> DaemonEpoch:
    """Where an epoch's seconds went: the sensor, then its runs' parts, summed over its runs."""
    runs = instance.get_runs(dg.RunsFilter(tags={EPOCH_TAG: str(epoch)}))
    timelines: list[Timeline] = sorted(
        (run_timeline(instance, r.run_id) for r in runs), key=lambda t: t.start
    )
    parts: dict[str, float] = {SENSOR: max(0.0, timelines[0].start - advanced)} if timelines else {}
    for t in timelines:
        for part in t.parts:
            parts[part.label] = parts.get(part.label, 0.0) + part.seconds
    parts[AFTER] = took - sum(parts.values())
    return DaemonEpoch(took, parts, len(timelines))


def daemon_side(  # noqa: PLR0917 (one side's setting)
    launcher: str,
    root: Path,
    data: DemoData,
    spark: SparkSession,
    master: str,
    interval: int,
    epochs: int,
    port: int,
) -> Measured:
    """``epochs`` epochs under ``dagster dev`` with ``launcher``, one after the other."""
    here = root / launcher
    state = here / "home"
    home = instance_dir(here, launcher)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EPOCHGATE_", "DAGSTER_"))}
    env |= {
        "DAGSTER_HOME": str(home),
        "EPOCHGATE_HOME": str(state),
        "EPOCHGATE_SENSOR_INTERVAL": str(interval),
        "EPOCHGATE_SPARK": master,
    }
    if master.startswith("sc://") and (token := read_token(connect_address(master)[1])):
        env[TOKEN_ENV] = token  # the server's token is kept under another home than the runs'
    ledger = Ledger(state / "ledger.duckdb")
    rt = Runtime(bank.pipeline(), ledger, spark, state / "data")
    measured = Measured(f"daemon, {launcher} launcher")
    dev = dev_server.start(here, env, port, workspace=REPO / "workspace.yaml")
    try:
        dev_server.wait_until_serving(dev)
        with dg.DagsterInstance.from_config(str(home)) as instance:
            for epoch in range(epochs):
                advanced = send_epoch(rt, data, epoch)

                def finished(e: int = epoch) -> bool:
                    return runs_idle(instance, e) and all_done(ledger, e)

                wait_for(finished, f"{launcher}: epoch {epoch}", 900)
                took = committed_at(ledger, epoch) - advanced
                done = epoch_parts(instance, epoch, advanced, took)
                measured.epochs.append(done)
                print(
                    f"  {measured.name}: epoch {epoch} {took:5.1f}s ({done.runs} runs)", flush=True
                )
    finally:
        dev_server.stop(dev)
    check_outputs(measured.name, rt, data, epochs)
    return measured


def check_outputs(side: str, rt: Runtime, data: DemoData, epochs: int) -> None:
    """Every stage at every epoch a side ran equals DuckDB SQL over the raw inputs: a time is
    worth nothing if the outputs are wrong."""
    wrong = verify_outputs(rt, Oracle(data.root), epochs)
    if wrong:
        raise SystemExit(f"{side}: outputs differ from the oracle: " + "; ".join(wrong[:5]))
    print(f"  {side}: every stage at every epoch equals the oracle", flush=True)


def direct_side(root: Path, data: DemoData, spark: SparkSession, epochs: int) -> Measured:
    """The same epochs through ``Runtime.run()`` on a ledger of its own."""
    state = root / "direct"
    rt = Runtime(bank.pipeline(), Ledger(state / "ledger.duckdb"), spark, state / "data")
    measured = Measured("epochgate run")
    for epoch in range(epochs):
        advanced = send_epoch(rt, data, epoch)
        rt.run()
        took = time.time() - advanced
        measured.epochs.append(DaemonEpoch(took, {}, 1))
        print(f"  {measured.name}: epoch {epoch} {took:5.1f}s", flush=True)
    check_outputs(measured.name, rt, data, epochs)
    return measured


# -- the report ----------------------------------------------------------------------------


def breakdown(side: Measured, warmup: int) -> list[str]:
    """The median of each part of an epoch, in the order of the first counted epoch."""
    counted = side.counted(warmup)
    labels = list(dict.fromkeys(label for e in counted for label in e.parts))
    lines = [f"  where an epoch's seconds go, {side.name} (median of {len(counted)} epochs):"]
    for label in labels:
        median = statistics.median(e.parts.get(label, 0.0) for e in counted)
        lines.append(f"    {label:<46} {median:6.2f}s")
    return lines


def report(
    direct: Measured, sides: list[Measured], interval: int, warmup: int
) -> tuple[list[str], bool]:
    """The lines to print (and write), and whether the goal was met by the last side."""
    d = direct.median(warmup)
    goal = interval + DIRECT_FACTOR * d
    n = len(direct.counted(warmup))
    each = ", ".join(f"{e.seconds:.1f}" for e in direct.counted(warmup))
    lines = [
        f"direct (`epochgate run`, same Spark): median {d:.1f}s per epoch over {n} epochs ({each})"
    ]
    met = False
    for side in sides:
        m = side.median(warmup)
        each = ", ".join(f"{e.seconds:.1f}" for e in side.counted(warmup))
        met = m <= goal
        verdict = "met" if met else "NOT met"
        lines.append(
            f"{side.name}: median {m:.1f}s per epoch ({each}); "
            f"goal <= {interval} + {DIRECT_FACTOR} x {d:.1f} = {goal:.1f}s: {verdict}"
        )
    for side in sides:
        lines += breakdown(side, warmup)
    return lines, met


# -- the part ------------------------------------------------------------------------------


def add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--interval", type=int, default=5, help="sensor interval, seconds (c)")
    parser.add_argument("--daemon-rows", type=int, default=2000, help="rows per epoch (c)")
    parser.add_argument("--daemon-epochs", type=int, default=3, help="epochs counted (c)")
    parser.add_argument("--daemon-warmup", type=int, default=1, help="epochs not counted (c)")
    parser.add_argument(
        "--launchers", default=",".join(LAUNCHERS), help="run launchers to time, comma-separated"
    )
    parser.add_argument("--results", type=Path, default=REPO / "bench" / "RESULTS.md")


def run(
    root: Path,
    spark: SparkSession,
    master: str,
    *,
    rows: int,
    epochs: int,
    warmup: int,
    interval: int,
    launchers: list[str],
    results: Path | None,
) -> bool:
    """Time the daemon sides and the direct side, print the report, write the results section;
    whether the goal was met."""
    unknown = sorted(set(launchers) - set(LAUNCHERS))
    if unknown or not launchers:
        raise SystemExit(f"--launchers: choose from {', '.join(LAUNCHERS)}; got {launchers}")
    total = warmup + epochs
    data = generate(root / "inputs", epochs=total, rows=rows, accounts=max(8, rows // 20), seed=3)
    print(
        f"bank under the Dagster daemon, {rows:,} rows per epoch, sensor interval {interval}s, "
        f"Spark at {master}; seconds from the last advance to every stage done",
        flush=True,
    )
    sides = [
        daemon_side(name, root, data, spark, master, interval, total, free_port())
        for name in launchers
    ]
    direct = direct_side(root, data, spark, total)
    lines, met = report(direct, sides, interval, warmup)
    load = os.getloadavg()[0]
    lines.append(f"load average (1 min) at the end: {load:.1f} on {os.cpu_count()} cores")
    print("\n".join(lines), flush=True)
    if results is not None:
        on_sail = engine_of(spark) is SAIL  # each engine's figures in a section of their own
        title = (
            "on Sail (`bench_dagster.py --part c --spark sail`)"
            if on_sail
            else "(`bench_dagster.py --part c`)"
        )
        body = "\n".join(
            [
                f"## The daemon path {title}",
                "",
                *about_this_run(),
                "",
                "```",
                *lines,
                "```",
            ]
        )
        write_section(results, "bench_dagster_sail" if on_sail else "bench_dagster", body)
    return met


def part_c(args: argparse.Namespace) -> None:
    """Part C on the Spark Connect server ``--spark`` names, or one started on a free port; with
    ``--spark sail`` (or ``sail-local-cluster``), on a Sail server started on a free port that
    every side uses (the bench's process, the run workers, the direct side)."""
    with scratch("bench-daemon-") as tmp:
        root = Path(tmp)
        if args.spark is None or args.spark in SAIL_ENGINES:
            os.environ[HOME_ENV] = str(root / "server-home")
        if args.spark in SAIL_ENGINES:
            port = free_port()
            server = sail.start(port, mode=sail.SAIL_URLS[args.spark], echo=lambda _: None)
            spark = spark_session(server.url)
            try:
                run_on(args, root, spark, server.url)
            finally:
                spark.stop()  # before its server: a client's exit cleanup retries for minutes
                sail.stop(port, echo=lambda _: None)
            return
        with connect_server.connect_session(args.spark, timeout=300) as connected:
            run_on(args, root, connected.spark, connected.url)


def run_on(args: argparse.Namespace, root: Path, spark: SparkSession, url: str) -> None:
    run(
        root,
        spark,
        url,
        rows=args.daemon_rows,
        epochs=args.daemon_epochs,
        warmup=args.daemon_warmup,
        interval=args.interval,
        launchers=[x.strip() for x in args.launchers.split(",") if x.strip()],
        results=args.results,
    )
