"""Partial state across processes: a fill killed while Spark works leaves the key a hole and
nothing half-written; fills in another process while epochs run here never interleave with
them, and each answer is a snapshot of every input up to its epoch and none later.

Every expected row comes from ``Oracle`` (DuckDB SQL over the raw input files).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from pipelines.run.runtime import Runtime
from progress.ledger import Ledger
from tests.fixtures.partial_reader import SIGNAL
from tests.fixtures.partials import Raw, ledger_pipeline, writes
from tests.waiting import wait_until

pytestmark = [pytest.mark.spark, pytest.mark.slow(55)]

REPO = Path(__file__).resolve().parents[3]


def reader(root: Path, mode: str) -> subprocess.Popen[str]:
    """The reader process (``tests.fixtures.partial_reader``), once it says it is ready."""
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.fixtures.partial_reader", str(root), mode],
        cwd=REPO,
        start_new_session=True,  # its JVM and Python workers too: the whole group is killed
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert child.stdout is not None
    line = child.stdout.readline()
    assert line == "ready\n", f"the reader did not start: {line!r}"
    return child


def listen(child: subprocess.Popen[str], lines: list[str]) -> None:
    """Append each line ``child`` prints to ``lines`` as it comes."""
    assert child.stdout is not None
    for line in child.stdout:
        lines.append(line)


def answered_again(child: subprocess.Popen[str], lines: list[str]) -> Callable[[], bool]:
    """Whether the reader has answered again since now (one more line of ``lines``), or ended."""
    seen = len(lines)
    return lambda: child.poll() is not None or len(lines) > seen


def test_a_fill_killed_while_spark_works_leaves_the_key_a_hole(
    tmp_path: Path, spark: SparkSession
) -> None:
    rt = Runtime(ledger_pipeline(), Ledger(tmp_path / "ledger.duckdb"), spark, tmp_path / "data")
    raw = Raw(rt, tmp_path / "raw")
    raw.epochs("moves", {0: writes(0, 1, 2), 1: writes(1, 1, 2)})
    rt.run()
    rt.lookup("balances", [2])
    before = rt.state_info("balances")
    child = reader(tmp_path, "stuck")
    try:
        # A task of the fill's Spark job says so from inside its fold: killed there.
        filling = tmp_path / SIGNAL
        wait_until(lambda: child.poll() is not None or filling.exists(), 180, "the fill's fold")
        assert child.poll() is None, "the fill ended before it could be killed"
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
    assert rt.state_info("balances") == before  # no key, row or counter moved
    read = rt.lookup("balances", [1, 2])  # its lock went with it: no wait
    assert (read.upqueried, read.hits) == ([1], [2])
    assert read.rows == raw.oracle().balances(1, [1, 2])
    after = rt.state_info("balances")
    assert (after.present_keys, after.rows, after.upqueries) == (2, 2, before.upqueries + 1)


def test_fills_in_another_process_beside_epoch_runs_are_snapshots(
    tmp_path: Path, spark: SparkSession
) -> None:
    rt = Runtime(ledger_pipeline(), Ledger(tmp_path / "ledger.duckdb"), spark, tmp_path / "data")
    raw = Raw(rt, tmp_path / "raw")
    epochs = 6
    raw.epochs(
        "moves",
        {e: [*writes(e, 1, 2, 3), (e % 2 + 1, -1, -(100 * e + e % 2 + 1))] for e in range(epochs)},
    )
    oracle = raw.oracle()
    child = reader(tmp_path, "snapshots")
    lines: list[str] = []  # one JSON line per read, as the reader prints them
    listening = threading.Thread(target=listen, args=(child, lines), daemon=True)
    listening.start()
    try:
        for epoch in range(epochs):
            rt.run_stage("balances", epoch)
            # The reader reads between runs, too: one read at least before the next run.
            wait_until(
                answered_again(child, lines),
                120,
                f"a read of the reader after epoch {epoch} ran",
            )
        (tmp_path / "stop").touch()
        child.wait(timeout=300)
        listening.join(60)
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
    assert child.returncode == 0
    answers = [json.loads(line) for line in lines]
    assert len(answers) >= 2
    for answer in answers:  # all of each epoch up to its own, none later
        assert answer["rows"] == oracle.balances(answer["as_of"], [1, 2]), answer
    assert [a["as_of"] for a in answers] == sorted(a["as_of"] for a in answers)
    assert answers[0]["as_of"] < epochs - 1  # the reads did overlap the runs
    final = rt.lookup("balances", [1, 2, 3])
    assert final.rows == oracle.balances(epochs - 1, [1, 2, 3])
