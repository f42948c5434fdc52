"""Eight Dagster backfills of ``bank`` at once, over overlapping epoch ranges, under the real
daemon (``dagster dev``, the project's ``dagster.yaml``: two warm run workers, the ``spark``
pool's limit of two), every run on one Spark Connect server, while new epochs arrive and the
frontier sensor (ticking every 2 s) runs them and re-runs what the backfills' revisions made
stale. When every backfill has ended and every stage is done at every epoch with nothing stale,
the invariants are checked (``tests.faults.invariants``): ``ledger verify`` clean, every output
equal to DuckDB SQL over the raw inputs (no row lost, none counted twice), nothing uncommitted
visible, and no frontier moved back between any two looks taken while the runs went on.

``FAULTS=full``: more epochs, and a run worker is killed (SIGKILL) while it executes a
backfill's run: the warm launcher's health check reports the run's worker failed, the run
fails, and the instance's run retries (enabled here) re-execute it on the replacement worker;
the backfill still ends with every partition materialized. Every service is stopped by pid;
nothing is left listening.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from pyspark.sql import SparkSession

from dagster_project.demo import instance_home
from dagster_project.internals import WorkerStatus
from dagster_project.names import WORKER_TAG
from dagster_project.partitions import epoch_key
from pipelines.examples import bank
from pipelines.examples.bank_data import DemoData, Oracle, generate
from pipelines.run.runtime import Runtime
from pipelines.spark import connect_server
from progress.ledger import Ledger
from tests.dagster_project.dagster_dev import DagsterDev, group_members, launch, stop
from tests.dagster_project.dagster_dev import wait_until_serving as dev_serving
from tests.dagster_project.test_daemon import (
    BACKFILL_STATUS,
    LAUNCH_BACKFILL,
    STAGES,
    close_inputs,
    partition_keys,
    send_epochs,
)
from tests.faults import invariants
from tests.faults.recorder import Recorder, full
from tests.sockets import accepts, free_port

pytestmark = [
    pytest.mark.faults,
    pytest.mark.dagster,
    pytest.mark.spark,
    pytest.mark.slow,
    pytest.mark.timeout(2400 if full() else 900),
]

BACKFILL_TAG = "dagster/backfill"
ENDED = {"COMPLETED", "COMPLETED_SUCCESS", "COMPLETED_FAILED", "FAILED", "CANCELED"}
FINISHED = {"SUCCESS", "FAILURE", "CANCELED"}
RETRIES = """
run_retries:
  enabled: true
  max_retries: 2
run_monitoring:
  enabled: true
  poll_interval_seconds: 2
"""
"""What the long form adds to the instance's settings: a failed run is re-executed, and the
daemon asks the launcher about its started runs' workers."""


@dataclass(frozen=True)
class Form:
    """A size of the campaign: epochs done before the backfills, epochs that arrive while they
    run, the backfills' epoch ranges (first, last), rows per epoch, and whether a run worker is
    killed mid-backfill."""

    done: tuple[int, ...]
    arriving: tuple[int, ...]
    ranges: tuple[tuple[int, int], ...]
    rows: int
    kill: bool

    @property
    def epochs(self) -> int:
        return len(self.done) + len(self.arriving)


FAST = Form(
    done=(0, 1),
    arriving=(2, 3),
    ranges=((0, 1), (0, 0), (1, 1), (0, 1), (1, 1), (0, 0), (0, 1), (1, 1)),
    rows=200,
    kill=False,
)
FULL = Form(
    done=(0, 1, 2, 3),
    arriving=(4, 5, 6, 7),
    ranges=((0, 3), (1, 2), (2, 3), (0, 1), (3, 3), (1, 3), (0, 2), (2, 2)),
    rows=400,
    kill=True,
)


def wait_until(dev: DagsterDev, done: Callable[[], bool], what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        dev.check_alive()
        assert time.monotonic() < deadline, f"{what}: not after {timeout:.0f}s\n{dev.log_tail()}"
        time.sleep(0.5)


def tags(run: dict[str, Any]) -> dict[str, str]:
    return {t["key"]: t["value"] for t in run["tags"]}


def launch_backfill(dev: DagsterDev, first: int, last: int) -> str:
    """A backfill of every stage over epochs ``first..last``; its id."""
    keys = [epoch_key(e) for e in range(first, last + 1)]
    launched = dev.graphql(
        LAUNCH_BACKFILL,
        {
            "params": {
                "partitionNames": keys,
                "assetSelection": [{"path": ["bank", s]} for s in STAGES],
                "title": f"backfill of epochs {first}..{last}",
            }
        },
    )["launchPartitionBackfill"]
    assert launched["__typename"] == "LaunchBackfillSuccess", launched
    backfill_id: str = launched["backfillId"]
    return backfill_id


def backfill_status(dev: DagsterDev, backfill_id: str) -> str:
    found = dev.graphql(BACKFILL_STATUS, {"id": backfill_id})["partitionBackfillOrError"]
    return str(found["status"])


def all_done(ledger: Ledger, epochs: int) -> bool:
    done = {s.stage: s.done for s in ledger.status("bank") if not s.is_input}
    return all(set(range(epochs)) <= set(done[stage]) for stage in STAGES)


class FrontierWatch:
    """The frontiers of ``bank`` looked at again and again; each look checked against the one
    before it (no frontier moved back)."""

    def __init__(self, rt: Runtime, tally: invariants.Tally) -> None:
        self.rt = rt
        self.tally = tally
        self.first = invariants.frontiers(rt)
        self.last = self.first
        self.looks = 1

    def look(self) -> None:
        now = invariants.frontiers(self.rt)
        invariants.check_frontiers(self.tally, self.last, now)
        self.last = now
        self.looks += 1


def kill_a_backfill_worker(dev: DagsterDev, backfills: set[str]) -> tuple[str, int] | None:
    """SIGKILL the worker of a started backfill run; the run and the worker's pid."""
    for run in dev.runs():
        tagged = tags(run)
        if run["status"] == "STARTED" and tagged.get(BACKFILL_TAG) in backfills:
            pid = int(tagged[WORKER_TAG])
            os.kill(pid, signal.SIGKILL)
            return run["runId"], pid
    return None


def no_spark() -> SparkSession:
    raise AssertionError("the test's process runs no stage: the daemon's runs do")


def test_eight_concurrent_backfills_while_new_epochs_arrive_count_nothing_twice(
    tmp_path: Path, recorder: Recorder
) -> None:
    form = FULL if full() else FAST
    campaign = recorder.campaign("8 concurrent backfills under the daemon")
    state = tmp_path / "home"
    data: DemoData = generate(
        tmp_path / "inputs", epochs=form.epochs, rows=form.rows, accounts=20, seed=21
    )
    ledger = Ledger(state / "ledger.duckdb")
    rt = Runtime(bank.pipeline(), ledger, no_spark, state / "data")
    tally = invariants.Tally()
    watch = FrontierWatch(rt, tally)

    dagster_home = instance_home(tmp_path)  # the project's dagster.yaml: two warm workers
    if form.kill:
        config = dagster_home / "dagster.yaml"
        config.write_text(config.read_text() + RETRIES)
    connect_port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EPOCHGATE_", "DAGSTER_"))}
    env |= {
        "DAGSTER_HOME": str(dagster_home),
        "EPOCHGATE_HOME": str(state),
        "EPOCHGATE_SENSOR_INTERVAL": "2",
        "EPOCHGATE_SPARK": connect_server.connect_url(connect_port),
    }
    dev = launch(tmp_path, env)  # it starts while the Connect server does
    killed: list[tuple[str, int, float]] = []  # the run, its worker's pid, when
    try:
        connect_server.start(connect_port, echo=lambda _: None, timeout=300)
        dev_serving(dev, timeout=300)
        # The epochs to backfill are sent; the frontier sensor runs them.
        send_epochs(rt, data, form.done)
        wait_until(dev, lambda: all_done(ledger, len(form.done)), "the first epochs", 600)
        watch.look()
        keys = {epoch_key(e) for e in form.done}
        assert keys <= set(partition_keys(dev))

        # Eight backfills at once, then new epochs arrive while they run.
        with ThreadPoolExecutor(len(form.ranges)) as pool:
            ids = list(pool.map(lambda r: launch_backfill(dev, *r), form.ranges))
        assert len(set(ids)) == len(form.ranges)
        for epoch in form.arriving:
            send_epochs(rt, data, (epoch,))
            watch.look()
            if form.kill and not killed:

                def kill() -> bool:
                    found = kill_a_backfill_worker(dev, set(ids))
                    if found is not None:
                        killed.append((*found, time.time()))
                    return bool(killed)

                wait_until(dev, kill, "a backfill run starts", 300)
            time.sleep(2.0)
        close_inputs(rt)

        def finished() -> bool:
            watch.look()
            if any(backfill_status(dev, i) not in ENDED for i in ids):
                return False
            if not all_done(ledger, form.epochs) or ledger.stale("bank"):
                return False
            return all(r["status"] in FINISHED for r in dev.runs())

        wait_until(dev, finished, "the backfills and the new epochs", 1800 if full() else 600)
        runs = dev.runs()
        statuses = {i: backfill_status(dev, i) for i in ids}
        with dg.DagsterInstance.from_config(str(dagster_home)) as instance:
            health = None
            for victim, _, _ in killed:
                record = instance.get_run_by_id(victim)
                assert record is not None
                health = instance.run_launcher.check_run_worker_health(record)
    finally:
        try:
            stop(dev)
        finally:
            connect_server.stop(connect_port, echo=lambda _: None)
        assert not group_members(dev.process.pid), "processes of dagster dev still running"
        assert not accepts(dev.port), f"something still listens on port {dev.port}"
        assert not accepts(connect_port), f"something still listens on port {connect_port}"

    by_backfill = [r for r in runs if tags(r).get(BACKFILL_TAG) in set(ids)]
    expected_runs = sum(last - first + 1 for first, last in form.ranges)
    if not killed:
        failed = [r for r in runs if r["status"] != "SUCCESS"]
        assert failed == [], failed
        assert set(statuses.values()) <= {"COMPLETED", "COMPLETED_SUCCESS"}, statuses
        assert len(by_backfill) == expected_runs
    else:
        ((victim, pid, at),) = killed
        campaign.killed("run worker, mid-backfill")
        assert health is not None
        assert health.status == WorkerStatus.FAILED, health
        assert next(r["status"] for r in runs if r["runId"] == victim) == "FAILURE"
        retried = [r for r in runs if tags(r).get("dagster/parent_run_id") == victim]
        assert [r["status"] for r in retried] == ["SUCCESS"], retried
        assert all(int(tags(r)[WORKER_TAG]) != pid for r in retried)
        failed = [r for r in runs if r["status"] != "SUCCESS"]
        assert [r["runId"] for r in failed] == [victim], failed
        assert len(by_backfill) == expected_runs + 1
        campaign.recovered(max(r["endTime"] for r in retried) - at)

    before = {"bank": watch.first}
    invariants.check_moves(tally, before, rt)
    invariants.check_visible(tally, rt)
    invariants.check_outputs(tally, rt, Oracle(data.root), form.epochs)
    campaign.checked(tally)
    assert tally.problems == [], tally.problems
    assert (tally.lost, tally.doubled) == (0, 0)
    assert watch.looks > 3
