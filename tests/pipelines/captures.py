"""A captured ``bank`` for the capture tests: seeded inputs sent epoch by epoch with one late
worker, what a capture's log holds read back with DuckDB alone, and a child process that runs
an epoch of a captured pipeline (for the tests that kill it).

    python -m tests.pipelines.captures HOME EPOCH [--kill-after-commit]

runs ``valid_cards`` at ``EPOCH`` in ``HOME``; with ``--kill-after-commit`` it kills itself
with SIGKILL right after the ledger commits the run, before the capture's sync appends it (a
listener added before the capture's own runs first).
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.parquet as pq

from pipelines import capture_log
from pipelines.capture_follower import follow
from pipelines.examples.bank import WORKERS, pipeline
from pipelines.examples.bank_data import DemoData, generate
from pipelines.runtime import Runtime
from pipelines.spark import SparkFactory
from progress.capture import Messages, Progress, Revision
from progress.ledger import Ledger

if False:  # pragma: no cover - typing only
    from pyspark.sql import SparkSession

EPOCHS = 3
LATE = 1
"""The epoch card_payments worker 2 holds open (it sends its second file late)."""


def inputs(root: Path) -> DemoData:
    """Seeded bank inputs; card worker 2's file at the late epoch split in two parts."""
    data = generate(root, epochs=EPOCHS, rows=300, accounts=20, seed=11)
    (whole,) = data.files("card_payments", LATE, WORKERS["card_payments"] - 1)
    table = pq.read_table(whole)
    half = table.num_rows // 2
    pq.write_table(table.slice(0, half), whole)
    pq.write_table(table.slice(half), whole.with_name("part-1.parquet"))
    return DemoData(data.root, data.epochs, LATE)


def runtime(
    home: Path, spark: SparkSession | SparkFactory, ledger: Ledger | None = None
) -> Runtime:
    """``bank`` in ``home``; every commit syncs the captures at once (no delay), so a test
    reads each step's events right after it."""
    ledger = ledger or Ledger(home / "ledger.duckdb")
    follow(ledger, delay=0)
    return Runtime(pipeline(rings=False), ledger, spark, home / "data")


def send_epoch(rt: Runtime, data: DemoData, epoch: int, *, hold: bool = True) -> None:
    """Every worker of every source sends its files at ``epoch`` and advances past it, except
    card worker 2 at the late epoch, which sends its first file only and holds the epoch (and
    sends nothing more until ``release_late``)."""
    for source, workers in WORKERS.items():
        for w in range(workers):
            handle = rt.input(source, w)
            if handle.epoch != epoch:
                continue  # the late worker, still holding its epoch
            files = data.files(source, epoch, w)
            late = hold and source == "card_payments" and w == workers - 1 and epoch == LATE
            for f in files[:1] if late else files:
                handle.send(f)
            if not late:
                handle.advance_to(epoch + 1)


def release_late(rt: Runtime, data: DemoData, through: int) -> None:
    """Card worker 2 sends its late file at the held epoch, advances past it, then sends its
    files of the epochs after it, through ``through``."""
    w = WORKERS["card_payments"] - 1
    handle = rt.input("card_payments", w)
    for f in data.files("card_payments", LATE, w)[1:]:
        handle.send(f)
    handle.advance_to(LATE + 1)
    for epoch in range(LATE + 1, through + 1):
        for f in data.files("card_payments", epoch, w):
            handle.send(f)
        handle.advance_to(epoch + 1)


def events(directory: Path) -> list[tuple[Any, ...]]:
    """``(index, kind, time, changes, batch)`` of every event, read by DuckDB alone."""
    return duckdb.sql(
        f"SELECT index, kind, time, changes, batch FROM read_json('{directory / capture_log.LOG}')"
        " WHERE kind IS NOT NULL ORDER BY index"
    ).fetchall()


def shapes(directory: Path) -> list[tuple[str, Any]]:
    """Each event as ``(kind, time)`` or ``("progress", changes)``."""
    out: list[tuple[str, Any]] = []
    for event in capture_log.read(directory).events:
        if isinstance(event, Progress):
            out.append(("progress", event.changes))
        elif isinstance(event, Messages):
            out.append(("messages", event.time))
        else:
            assert isinstance(event, Revision)
            out.append(("revision", event.time))
    return out


def rows_at(directory: Path, time: int, sql: str = "SELECT * FROM t") -> list[tuple[Any, ...]]:
    """The rows the log's last data event at ``time`` holds (a revision replaces the
    messages before it; messages add up), through ``sql`` over them as ``t``."""
    files: list[str] = []
    for event in capture_log.read(directory).events:
        if isinstance(event, Revision) and event.time == time:
            files = [f.path for f in event.files]
        elif isinstance(event, Messages) and event.time == time:
            files += [f.path for f in event.files]
    if not files:
        return []
    con = duckdb.connect()
    con.read_parquet([str(directory / f) for f in files]).create_view("t")
    return sorted(con.execute(sql).fetchall(), key=repr)


def main(argv: list[str]) -> int:
    from pipelines.spark import spark_session

    home, epoch = Path(argv[0]), int(argv[1])
    ledger = Ledger(home / "ledger.duckdb")
    if "--kill-after-commit" in argv:
        ledger.on_commit(lambda pipelines: os.kill(os.getpid(), signal.SIGKILL))
    rt = runtime(home, spark_session, ledger)
    print("running", flush=True)
    rt.run_stage("valid_cards", epoch)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
