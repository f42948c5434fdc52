"""Capture's cost: ``bank`` per epoch with its streams captured, against the same without.

    .venv/bin/python bench/bench_capture.py            # BENCH_SIZE=fast unless set
    BENCH_SIZE=full .venv/bin/python bench/bench_capture.py [--results bench/RESULTS.md]

Two homes run ``bank`` (without ``rings``) on the same seeded inputs, epoch by epoch, in turns
(so a drift of the machine hits both): one captures ``valid_cards``, ``movements`` (a union,
whose messages are its inputs' files) and each worker of ``card_payments``; the other captures
nothing. An epoch is every worker's send and advance, then ``run()``. Figures:

* per-epoch time with capture on / off (median over the epochs after the first, which warms
  Spark up; goal <= 1.05; the full form has 1,000,000 rows per epoch);
* what a commit pays when its pipeline has no capture: the check, which reads the captured
  pipelines with the counts watermark the commit reads anyway, against the median commit (an
  advance) it is part of (median over many of each; goal <= 0.05).

Then replay (``replay``):

* throughput: a capture of many epochs (one Parquet file and one ``Progress`` per epoch)
  replayed into a fresh ledger, in events/s and rows/s: feeding only (``Runtime.replay()``),
  then feeding and running a stage over every epoch (``Runtime.run()``, on a shorter capture);
* follow latency: a ``bank`` captures ``valid_cards`` and runs it epoch by epoch while a
  follower in another home and ledger (a child process, ``epochgate replay -p
  bench_capture:follower --follow``) replays the capture; per epoch, the follower's run start
  minus the upstream's commit of that epoch, both read from the two ledgers' records (median
  over the epochs after the first, whose run also starts the follower's Spark; goal <= 2 s
  plus the poll interval, which is printed).

Each figure made of repeated measurements is printed as its median with its spread (fastest to
slowest), each goal with whether it is met (the replay throughputs have none); every ratio is
of figures from the same run. The figures go to the ``bench_capture`` section of
``bench/RESULTS.md`` (``--results`` names another file).
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from results_file import Report, chosen_size, figure_line, section, spread, write_section
from scratch import scratch

from pipelines import Runtime
from pipelines.capture import log as capture_log
from pipelines.examples.bank import WORKERS, pipeline
from pipelines.examples.bank_data import DemoData, generate
from pipelines.spark.session import quiet, spark_session
from pipelines.stages.pipeline import Pipeline
from progress.capture import DataFile, Event, Messages, Progress
from progress.ledger import Ledger

FOLLOWED_ENV = "BENCH_CAPTURE_FOLLOWED"
"""The capture directory the follower (``follower``) replays."""
POLL = 0.2
"""The follower's ``--poll``, in seconds."""
REPO = Path(__file__).resolve().parents[1]
RATIO_GOAL = 1.05
"""Per-epoch time with capture on / off."""
CHECK_GOAL = 0.05
"""A commit's capture check / the commit, no capture."""


@dataclass(frozen=True)
class Size:
    rows: int
    epochs: int
    accounts: int
    commits: int
    """Advances timed for the commit figure."""
    replay_epochs: int
    """Epochs of the capture fed into a fresh ledger (two events each)."""
    run_epochs: int
    """Epochs of the capture fed and run."""
    replay_rows: int
    """Rows per epoch of those captures."""
    follow_epochs: int
    """Epochs the follower follows (the first one starts its Spark and is not counted)."""


SIZES = {
    "fast": Size(
        rows=2_000,
        epochs=2,
        accounts=100,
        commits=20,
        replay_epochs=20,
        run_epochs=2,
        replay_rows=100,
        follow_epochs=2,
    ),
    "full": Size(
        rows=1_000_000,
        epochs=9,
        accounts=50_000,
        commits=200,
        replay_epochs=1_000,
        run_epochs=30,
        replay_rows=10_000,
        follow_epochs=8,
    ),
}


def epoch_seconds(rt: Runtime, data: DemoData, epoch: int) -> float:
    started = time.perf_counter()
    for source, workers in WORKERS.items():
        for w in range(workers):
            handle = rt.input(source, w)
            for f in data.files(source, epoch, w):
                handle.send(f)
            handle.advance_to(epoch + 1)
    rt.run()
    return time.perf_counter() - started


def captured(rt: Runtime, root: Path) -> None:
    rt.capture("valid_cards", root / "captures" / "valid_cards")
    rt.capture("movements", root / "captures" / "movements")
    for w in range(WORKERS["card_payments"]):
        rt.capture("card_payments", root / "captures" / f"card_payments-{w}", worker=w)


def commit_cost(size: Size, root: Path) -> tuple[list[float], list[float]]:
    """Seconds of each capture check and of each advance commit, no capture."""
    ledger = Ledger(root / "commits.duckdb")
    pipeline(rings=False).register(ledger)
    commits = []
    for epoch in range(1, size.commits + 1):
        started = time.perf_counter()
        ledger.advance("bank", "accounts", 0, epoch)
        commits.append(time.perf_counter() - started)
    queries = []
    with ledger._sessions.session() as s:  # the check as a commit's transaction makes it
        s.watermark()  # read by every commit
        for _ in range(size.commits):
            started = time.perf_counter()
            s.captured({"bank"})
            queries.append(time.perf_counter() - started)
    return queries, commits


def run(size: Size, spark: SparkSession, root: Path) -> list[str]:
    """Capture on against off, and a commit's check; the lines to write."""
    data = generate(
        root / "inputs", epochs=size.epochs, rows=size.rows, accounts=size.accounts, seed=5
    )
    on = Runtime(pipeline(rings=False), Ledger(root / "on" / "ledger.duckdb"), spark, root / "on")
    off = Runtime(
        pipeline(rings=False), Ledger(root / "off" / "ledger.duckdb"), spark, root / "off"
    )
    captured(on, root / "on")
    seconds: dict[str, list[float]] = {"on": [], "off": []}
    for epoch in range(size.epochs):
        turns = [("on", on), ("off", off)] if epoch % 2 == 0 else [("off", off), ("on", on)]
        for name, rt in turns:
            seconds[name].append(epoch_seconds(rt, data, epoch))
        print(
            f"  epoch {epoch}: on {seconds['on'][-1]:.2f}s, off {seconds['off'][-1]:.2f}s",
            flush=True,
        )
    # The first epoch of each side warms Spark up.
    seconds = {name: xs[1:] or xs for name, xs in seconds.items()}
    for found in on.captures():
        assert found.behind == 0, found
        assert found.error is None, found
        print(f"  {found.stage} {found.worker}: {found.events} events, {found.rows} rows")
    ratio = statistics.median(seconds["on"]) / statistics.median(seconds["off"])
    queries, commits = commit_cost(size, root)
    query, commit = statistics.median(queries), statistics.median(commits)
    out = Report()
    out.detail(f"per epoch, capture on: {spread(seconds['on'])}")
    out.detail(f"per epoch, capture off: {spread(seconds['off'])}")
    out.figure(figure_line("per-epoch time capture on / off (median)", ratio, RATIO_GOAL))
    out.detail(f"no capture, the check: {spread([q * 1e3 for q in queries], ' ms', 4)}")
    out.detail(f"no capture, an advance: {spread([c * 1e3 for c in commits], ' ms', 2)}")
    out.figure(
        figure_line(
            "a commit's capture check / the commit (no capture)",
            query / commit,
            CHECK_GOAL,
            why="of the medians",
        )
    )
    return out.lines


# -- replay --------------------------------------------------------------------------------------

MOVEMENTS = T.StructType(
    [T.StructField("account_id", T.LongType()), T.StructField("amount_cents", T.LongType())]
)


def totals(df: DataFrame) -> DataFrame:
    return df.groupBy("account_id").agg(F.sum("amount_cents").alias("amount_cents"))


def replayed(directory: Path) -> Pipeline:
    p = Pipeline("replayed")
    p.transform("totals", p.replay("movements", [directory], workers=1), fn=totals)
    return p


def many_epochs(directory: Path, epochs: int, rows: int) -> int:
    """A capture of ``epochs`` epochs of ``rows`` rows each (a message, then the release);
    returns its number of events."""
    capture_log.create(
        directory, capture_log.new_header("bench", "movements", schema=MOVEMENTS.json())
    )
    events: list[Event] = []
    for epoch in range(epochs):
        name = f"{capture_log.DATA}/{epoch:06d}.parquet"
        path = directory / name
        ids = range(epoch * rows, (epoch + 1) * rows)
        table = pa.table(
            {"account_id": [i % 1000 for i in ids], "amount_cents": list(ids)},
            schema=pa.schema([("account_id", pa.int64()), ("amount_cents", pa.int64())]),
        )
        pq.write_table(table, path)
        data = DataFile(name, rows, path.stat().st_size, capture_log.sha256(path))
        events += [Messages(epoch, (data,)), Progress(((epoch + 1, 1), (epoch, -1)))]
    with capture_log.locked(directory) as d:
        capture_log.append(d, 0, events)
    return len(events)


def throughput(size: Size, spark: SparkSession, root: Path) -> list[str]:
    """Replay's feeding, then feeding and running; the lines to write."""
    events = many_epochs(root / "many", size.replay_epochs, size.replay_rows)
    rt = Runtime(replayed(root / "many"), Ledger(root / "fed.duckdb"), spark, root / "fed")
    started = time.perf_counter()
    fed = rt.replay()
    seconds = time.perf_counter() - started
    assert fed == events, (fed, events)
    rows = size.replay_epochs * size.replay_rows
    out = Report()
    out.detail(f"fed {fed} events, {rows} rows in {seconds:.2f}s")
    out.figure(
        figure_line("replay feeding: events/s", fed / seconds, None, unit=" events/s", places=0)
    )
    out.figure(
        figure_line("replay feeding: rows/s", rows / seconds, None, unit=" rows/s", places=0)
    )
    again = []
    for _ in range(5):
        started = time.perf_counter()
        assert rt.replay() == 0
        again.append(time.perf_counter() - started)
    out.detail(f"replay() with nothing new: {spread([a * 1e3 for a in again], ' ms', 1)}")

    events = many_epochs(root / "run", size.run_epochs, size.replay_rows)
    rt = Runtime(replayed(root / "run"), Ledger(root / "ran.duckdb"), spark, root / "ran")
    started = time.perf_counter()
    ran = rt.run()
    seconds = time.perf_counter() - started
    assert len(ran) == size.run_epochs, ran
    rows = size.run_epochs * size.replay_rows
    out.detail(f"fed {events} events, {rows} rows and ran {len(ran)} epochs in {seconds:.2f}s")
    out.figure(
        figure_line(
            "replay feeding + running: events/s", events / seconds, None, unit=" events/s", places=0
        )
    )
    out.figure(
        figure_line(
            "replay feeding + running: rows/s", rows / seconds, None, unit=" rows/s", places=0
        )
    )
    return out.lines


def follower() -> Pipeline:
    """What the follower runs: the captured ``valid_cards`` replayed, totalled per category."""
    p = Pipeline("follower")
    cards = p.replay("valid_cards", [os.environ[FOLLOWED_ENV]], workers=1)
    p.transform("card_totals", cards, fn=card_totals)
    return p


def card_totals(df: DataFrame) -> DataFrame:
    return df.groupBy("category").agg(F.sum("amount_cents").alias("total_cents"))


def start_follower(capture: Path, home: Path) -> subprocess.Popen[bytes]:
    env = dict(os.environ, **{FOLLOWED_ENV: str(capture)})
    paths = [str(REPO / "bench"), str(REPO), env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    argv = ["replay", "-p", "bench_capture:follower", "--ledger", str(home / "ledger.duckdb")]
    argv += ["--data", str(home / "data"), "--follow", "--poll", str(POLL)]
    home.mkdir(parents=True)
    with (home / "follower.log").open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "pipelines.cli.main", *argv],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def run_started(ledger: Ledger, epoch: int) -> float | None:
    """When the follower's run of ``card_totals`` at ``epoch`` started (epoch seconds), once
    it has finished (so the next epoch finds the follower waiting, not busy)."""
    if not ledger.path.exists() or "follower" not in ledger.pipelines():
        return None
    runs = [r for r in ledger.history("follower", "card_totals", epoch).runs if r.finished_at]
    return min((r.started_at.timestamp() for r in runs), default=None)


def committed(ledger: Ledger, epoch: int) -> float:
    """When the upstream's run of ``valid_cards`` at ``epoch`` committed (epoch seconds)."""
    (batch,) = [
        b for b in ledger.history("bank", "valid_cards", epoch).batches if b.key.startswith("run:")
    ]
    return batch.committed_at.timestamp()


def follow_latency(size: Size, spark: SparkSession, root: Path) -> list[str]:
    """A follower in a child process replaying a capture as it grows; the lines to write."""
    data = generate(
        root / "follow-inputs",
        epochs=size.follow_epochs,
        rows=size.rows,
        accounts=size.accounts,
        seed=7,
    )
    up = Runtime(pipeline(rings=False), Ledger(root / "up" / "ledger.duckdb"), spark, root / "up")
    up.capture("valid_cards", root / "up" / "cards")
    down = Ledger(root / "down" / "ledger.duckdb")
    child = start_follower(root / "up" / "cards", root / "down")
    latencies: list[float] = []
    try:
        for epoch in range(size.follow_epochs):
            for w in range(WORKERS["card_payments"]):
                handle = up.input("card_payments", w)
                for f in data.files("card_payments", epoch, w):
                    handle.send(f)
                handle.advance_to(epoch + 1)
            up.run_stage("valid_cards", epoch)
            deadline = time.monotonic() + 300
            while (started := run_started(down, epoch)) is None:
                assert child.poll() is None, (root / "down" / "follower.log").read_text()
                assert time.monotonic() < deadline, "the follower did not run"
                time.sleep(0.05)
            latency = started - committed(up.ledger, epoch)
            print(f"  epoch {epoch}: the follower's run started {latency:.2f}s after the commit")
            if epoch:
                latencies.append(latency)
        for w in range(WORKERS["card_payments"]):
            up.input("card_payments", w).close()
        assert child.wait(timeout=300) == 0, (root / "down" / "follower.log").read_text()
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
    out = Report()
    out.detail(f"poll interval {POLL}s")
    out.detail(f"follow, per epoch after the first: {spread(latencies)}")
    out.figure(
        figure_line(
            "follow: upstream commit to downstream run start (median)",
            statistics.median(latencies),
            2 + POLL,
            unit="s",
            digits=1,
            why="2 s plus the poll interval",
        )
    )
    return out.lines


def capture_section(lines: Sequence[str], size: Size, size_name: str) -> str:
    return section(
        "bench_capture: capture's cost, replay's throughput and a follower's latency",
        [
            f"size: {size_name}; `bank` without rings, {size.epochs} epochs (the first a "
            f"warm-up) of {size.rows:,} rows on each side (capture on, off) in turns; "
            f"{size.commits} commits and checks timed; replay of {size.replay_epochs} epochs "
            f"(fed) and {size.run_epochs} (fed and run) of {size.replay_rows:,} rows; "
            f"{size.follow_epochs} epochs followed",
            "figures over repeated epochs or calls: median (spread: fastest to slowest); each "
            "ratio is of figures from this run",
        ],
        lines,
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=REPO / "bench" / "RESULTS.md")
    args = parser.parse_args(argv)
    name, size = chosen_size(SIZES)
    print(f"capture on vs off ({name}: {size})", flush=True)
    spark = spark_session()
    quiet(spark)
    with scratch("bench-capture-") as tmp:
        lines = run(size, spark, Path(tmp))
        print(f"replay ({name})", flush=True)
        lines += throughput(size, spark, Path(tmp))
        lines += follow_latency(size, spark, Path(tmp))
    write_section(args.results, "bench_capture", capture_section(lines, size, name))
    print(f"written: {args.results}")


if __name__ == "__main__":
    main()
