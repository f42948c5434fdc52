"""``epochgate replay --follow`` across two ledgers: a ``bank`` in one home captures
``valid_cards`` while it runs epoch by epoch with a late worker; a follower in another home (a
child process) replays that capture as it grows. Checked from the two ledgers' records: the
follower runs each epoch only after the upstream committed it, never the held epoch before the
late worker released it, its outputs equal the upstream's (and DuckDB's over the raw inputs),
and it ends by itself when the captured stream is done, leaving nothing running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb
import pytest
from pyspark.sql import SparkSession

from pipelines.examples.bank import WORKERS
from pipelines.examples.bank_data import Oracle
from progress.ledger import Ledger, MessageRecord
from tests.environment import without_settings
from tests.fixtures import captures
from tests.fixtures.followed import FOLLOWED_ENV, NAME, REF
from tests.waiting import wait_until

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[3]
POLL = 0.2
TOTALS_SQL = (
    "SELECT merchant_category, sum(-amount_cents)::BIGINT, count(*) FROM cards "
    "WHERE epoch = $e AND amount_cents > 0 AND merchant_category IS NOT NULL GROUP BY ALL"
)


def start_follower(capture: Path, home: Path, log: Path) -> subprocess.Popen[bytes]:
    """``epochgate replay -p followed --follow`` in ``home``, in a session of its own (so its
    JVM can be found, and stopped, with it)."""
    env = without_settings()
    env[FOLLOWED_ENV] = str(capture)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    argv = ["replay", "-p", REF, "--ledger", str(home / "ledger.duckdb")]
    argv += ["--data", str(home / "data"), "--follow", "--poll", str(POLL)]
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "pipelines.cli.main", *argv],
            env=env,
            cwd=home.parent,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def in_session(sid: int) -> list[int]:
    """The processes still alive in session ``sid``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[3]) == sid and fields[0] != "Z":
            found.append(int(entry.name))
    return found


def done(ledger: Ledger) -> list[int]:
    if not ledger.path.exists() or NAME not in ledger.pipelines():
        return []
    return [e for e in ledger.done_epochs(NAME, "card_totals") if isinstance(e, int)]


def committed_at(ledger: Ledger, pipeline: str, stage: str, epoch: int) -> datetime:
    """When the run of ``(stage, epoch)`` committed."""
    (batch,) = [
        b for b in ledger.history(pipeline, stage, epoch).batches if b.key.startswith("run:")
    ]
    return batch.committed_at


def run_started(ledger: Ledger, stage: str, epoch: int) -> datetime:
    """When the follower's (only) run of ``(stage, epoch)`` started."""
    (run,) = ledger.history(NAME, stage, epoch).runs
    assert run.status == "succeeded", run
    return run.started_at


def rows(messages: list[MessageRecord], sql: str = "SELECT * FROM t") -> list[tuple[Any, ...]]:
    paths = [f"{m.path}/*.parquet" for m in messages if m.path]
    if not paths:
        return []
    con = duckdb.connect()
    con.read_parquet(paths).create_view("t")
    return sorted(con.execute(sql).fetchall(), key=repr)


def test_a_follower_runs_each_epoch_only_after_the_upstream_committed_it(
    tmp_path: Path, spark: SparkSession
) -> None:
    data = captures.inputs(tmp_path / "raw")
    upstream = captures.runtime(tmp_path / "a", spark)
    capture = tmp_path / "cards"
    upstream.capture("valid_cards", capture)
    home = tmp_path / "b"
    home.mkdir()
    log = tmp_path / "follower.log"
    follower = start_follower(capture, home, log)
    b = Ledger(home / "ledger.duckdb")
    try:
        captures.send_epoch(upstream, data, 0)
        upstream.run_stage("valid_cards", 0)
        wait_until(lambda: done(b) == [0], 180, "the follower's epoch 0", detail=log.read_text)

        captures.send_epoch(upstream, data, 1)  # card worker 2 holds epoch 1
        captures.send_epoch(upstream, data, 2)
        assert ("valid_cards", 1) not in upstream.ready()
        # The point is a span of time: no look of the follower marks itself when it finds
        # nothing new, and what is checked is that none of 20 of them runs epoch 1.
        time.sleep(20 * POLL)
        assert follower.poll() is None, log.read_text()
        assert done(b) == [0]
        assert b.history(NAME, "card_totals", 1).runs == ()
        assert b.worker_time(NAME, "valid_cards", 0) == 1  # the replayed capability holds 1

        captures.release_late(upstream, data, 2)
        released = max(
            x.committed_at for x in upstream.ledger.history("bank", "card_payments", 1).batches
        )
        for epoch in (1, 2):
            upstream.run_stage("valid_cards", epoch)
        for w in range(WORKERS["card_payments"]):  # the captured stream ends
            upstream.input("card_payments", w).close()
        assert follower.wait(timeout=180) == 0, log.read_text()
    finally:
        if follower.poll() is None:
            os.killpg(follower.pid, signal.SIGKILL)
            follower.wait()
    wait_until(lambda: not in_session(follower.pid), 30, "the end of the follower's JVM")

    a = upstream.ledger
    assert done(b) == [0, 1, 2]
    for epoch in range(3):
        assert run_started(b, "card_totals", epoch) > committed_at(a, "bank", "valid_cards", epoch)
    assert run_started(b, "card_totals", 1) > released
    oracle = Oracle(data.root).con
    for epoch in range(3):
        replayed = b.message(NAME, "valid_cards", 0, epoch)
        assert rows(replayed) == rows(a.message("bank", "valid_cards", 0, epoch))
        assert rows(b.message(NAME, "card_totals", 0, epoch)) == sorted(
            oracle.execute(TOTALS_SQL, {"e": epoch}).fetchall(), key=repr
        )
    assert "fed" in log.read_text()
