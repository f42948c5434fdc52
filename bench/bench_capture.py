"""Capture's cost: ``bank`` per epoch with its streams captured, against the same without.

    .venv/bin/python bench/bench_capture.py            # BENCH_SIZE=fast unless set
    BENCH_SIZE=full .venv/bin/python bench/bench_capture.py

Two homes run ``bank`` (without ``rings``) on the same seeded inputs, epoch by epoch, in turns
(so a drift of the machine hits both): one captures ``valid_cards``, ``movements`` (a union,
whose messages are its inputs' files) and each worker of ``card_payments``; the other captures
nothing. An epoch is every worker's send and advance, then ``run()``. Figures:

* per-epoch time with capture on / off (median over the epochs; goal <= 1.05; the full form has
  1,000,000 rows per epoch);
* what a commit pays when its pipeline has no capture: the check, which reads the captured
  pipelines with the counts watermark the commit reads anyway, against the median commit (an
  advance) it is part of.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import SparkSession

from pipelines import Runtime
from pipelines.examples.bank import WORKERS, pipeline
from pipelines.examples.bank_data import DemoData, generate
from pipelines.spark import quiet, spark_session
from progress.ledger import Ledger


@dataclass(frozen=True)
class Size:
    rows: int
    epochs: int
    accounts: int
    commits: int
    """Advances timed for the commit figure."""


SIZES = {
    "fast": Size(rows=2_000, epochs=2, accounts=100, commits=20),
    "full": Size(rows=1_000_000, epochs=5, accounts=50_000, commits=200),
}


def figure(name: str, value: float, goal: str, unit: str = "") -> None:
    print(f"{name}: {value:.3f}{unit} (goal {goal})", flush=True)


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


def commit_cost(size: Size, root: Path) -> tuple[float, float]:
    """Median seconds of the capture check and of an advance commit, no capture."""
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
    return statistics.median(queries), statistics.median(commits)


def run(size: Size, spark: SparkSession, root: Path) -> None:
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
    for found in on.captures():
        assert found.behind == 0, found
        assert found.error is None, found
        print(f"  {found.stage} {found.worker}: {found.events} events, {found.rows} rows")
    ratio = statistics.median(seconds["on"]) / statistics.median(seconds["off"])
    print(
        f"  median per epoch: on {statistics.median(seconds['on']):.2f}s, "
        f"off {statistics.median(seconds['off']):.2f}s"
    )
    figure("per-epoch time capture on / off (median)", ratio, "<= 1.05")
    query, commit = commit_cost(size, root)
    print(f"  no capture: the check {query * 1e3:.4f} ms, an advance {commit * 1e3:.2f} ms")
    figure("a commit's capture check / the commit (no capture)", query / commit, "<= 0.05")


def main() -> None:
    name = os.environ.get("BENCH_SIZE", "fast")
    if name not in SIZES:
        sys.exit(f"BENCH_SIZE must be one of {', '.join(SIZES)}, not {name!r}")
    size = SIZES[name]
    print(f"capture on vs off ({name}: {size})", flush=True)
    spark = spark_session()
    quiet(spark)
    with tempfile.TemporaryDirectory() as tmp:
        run(size, spark, Path(tmp))


if __name__ == "__main__":
    main()
