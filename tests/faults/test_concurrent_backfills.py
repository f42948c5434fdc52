"""Eight Dagster backfills of ``bank`` at once, over overlapping epoch ranges, under the real
daemon (``dagster dev``, the project's ``dagster.yaml``: two warm run workers, the ``spark``
pool's limit of two), every run on one Sail server (through Spark Connect, as a Connect server
serves them: ``test_daemon`` runs the daemon's runs on one), while new epochs arrive and the
frontier sensor (ticking every 2 s) runs them and re-runs what the backfills' revisions made
stale. When every backfill has ended and every stage is done at every epoch with nothing stale,
the invariants are checked (``tests.faults.invariants``): ``ledger verify`` clean, every output
equal to DuckDB SQL over the raw inputs (no row lost, none counted twice), nothing uncommitted
visible, and no frontier moved back between any two looks taken while the runs went on.

The campaign is one scenario (``Backfills``, shared by the module) taken in steps, each a test
that says what it checks; a step runs once, when the first test that needs it asks, after the
steps before it; one that failed fails the tests after it, naming it.

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
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from pyspark.sql import SparkSession

from dagster_project.dev.instance import instance_home
from dagster_project.internals import WorkerStatus
from dagster_project.names import WORKER_TAG
from dagster_project.partitions import epoch_key
from pipelines.examples import bank
from pipelines.examples.bank_data import DemoData, Oracle, generate
from pipelines.run.runtime import Runtime
from pipelines.spark import sail
from pipelines.spark.servers import HOST
from progress.ledger import Ledger
from tests.dagster_project.dagster_dev import DagsterDev, group_members, launch, stop
from tests.dagster_project.dagster_dev import wait_until_serving as dev_serving
from tests.dagster_project.test_daemon import (
    BACKFILL_STATUS,
    LAUNCH_BACKFILL,
    STAGES,
    close_inputs,
    in_home,
    partition_keys,
    send_epochs,
)
from tests.environment import without_settings
from tests.faults import invariants
from tests.faults.recorder import Campaign, Recorder, full
from tests.sockets import free_port, listeners, started_from
from tests.steps import Steps
from tests.waiting import wait_until

pytestmark = [
    pytest.mark.faults,
    pytest.mark.dagster,
    pytest.mark.spark,
    pytest.mark.slow(150),
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


def wait_for(dev: DagsterDev, done: Callable[[], bool], what: str, timeout: float) -> None:
    """Wait until ``done()``, failing at once when ``dagster dev`` has exited."""

    def alive_and_done() -> bool:
        dev.check_alive()
        return done()

    wait_until(alive_and_done, timeout, what, every=0.5, detail=dev.log_tail)


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


def partition_added(dev: DagsterDev, key: str) -> Callable[[], bool]:
    """Whether the instance has partition ``key`` (the frontier sensor adds each epoch it sees)."""
    return lambda: key in partition_keys(dev)


STOPPED = "the services stopped"


@dataclass
class Backfills:
    """The campaign's world, shared by its steps: the inputs, the ledger and a runtime on it (to
    send epochs and read outputs; it runs no stage), ``dagster dev`` and the Sail server,
    and what each step found."""

    form: Form
    campaign: Campaign
    data: DemoData
    ledger: Ledger
    rt: Runtime
    dagster_home: Path
    dev: DagsterDev
    sail_port: int
    state: Path
    tally: invariants.Tally
    watch: FrontierWatch
    steps: Steps = field(default_factory=Steps)
    ids: list[str] = field(default_factory=list)
    killed: list[tuple[str, int, float]] = field(default_factory=list)
    """The run killed, its worker's pid, and when."""
    runs: list[dict[str, Any]] = field(default_factory=list)
    statuses: dict[str, str] = field(default_factory=dict)
    health: Any = None

    def first_epochs(self) -> None:
        """The epochs to backfill are sent; the frontier sensor runs them."""

        def step() -> None:
            send_epochs(self.rt, self.data, self.form.done)
            done = len(self.form.done)
            wait_for(self.dev, lambda: all_done(self.ledger, done), "the first epochs", 600)
            self.watch.look()

        self.steps.once("the first epochs run", step)

    def launched(self) -> list[str]:
        """Eight backfills at once; their ids."""

        def step() -> None:
            self.first_epochs()
            with ThreadPoolExecutor(len(self.form.ranges)) as pool:
                self.ids = list(pool.map(lambda r: launch_backfill(self.dev, *r), self.form.ranges))

        self.steps.once("eight backfills launched", step)
        return self.ids

    def arrived(self) -> None:
        """New epochs arrive while the backfills run, each seen by the frontier sensor (its
        partition added) before the next; the long form kills a backfill run's worker."""

        def step() -> None:
            ids = set(self.launched())
            for epoch in self.form.arriving:
                send_epochs(self.rt, self.data, (epoch,))
                self.watch.look()
                if self.form.kill and not self.killed:

                    def kill() -> bool:
                        found = kill_a_backfill_worker(self.dev, ids)
                        if found is not None:
                            self.killed.append((*found, time.time()))
                        return bool(self.killed)

                    wait_for(self.dev, kill, "a backfill run starts", 300)
                seen = f"the frontier sensor seeing epoch {epoch}"
                wait_for(self.dev, partition_added(self.dev, epoch_key(epoch)), seen, 300)
            close_inputs(self.rt)

        self.steps.once("new epochs arrived", step)

    def settled(self) -> None:
        """Every backfill has ended, every stage is done at every epoch with nothing stale, and
        every run has finished; what the runs and the instance say then."""

        def step() -> None:
            self.arrived()

            def finished() -> bool:
                self.watch.look()
                if any(backfill_status(self.dev, i) not in ENDED for i in self.ids):
                    return False
                if not all_done(self.ledger, self.form.epochs) or self.ledger.stale("bank"):
                    return False
                return all(r["status"] in FINISHED for r in self.dev.runs())

            timeout = 1800 if full() else 600
            wait_for(self.dev, finished, "the backfills and the new epochs", timeout)
            self.runs = self.dev.runs()
            self.statuses = {i: backfill_status(self.dev, i) for i in self.ids}
            with dg.DagsterInstance.from_config(str(self.dagster_home)) as instance:
                for victim, _, _ in self.killed:
                    record = instance.get_run_by_id(victim)
                    assert record is not None
                    self.health = instance.run_launcher.check_run_worker_health(record)

        self.steps.once("everything settled", step)

    def stopped(self) -> None:
        """Every service stopped by pid (after the runs settled, when they did)."""

        def step() -> None:
            try:
                stop(self.dev)
            finally:
                with in_home(self.state):
                    sail.stop(self.sail_port, echo=lambda _: None)

        self.steps.once(STOPPED, step)

    def backfill_runs(self) -> list[dict[str, Any]]:
        return [r for r in self.runs if tags(r).get(BACKFILL_TAG) in set(self.ids)]


@pytest.fixture(scope="module")
def backfills(tmp_path_factory: pytest.TempPathFactory, recorder: Recorder) -> Iterator[Backfills]:
    form = FULL if full() else FAST
    tmp_path = tmp_path_factory.mktemp("backfills")
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
    sail_port = free_port()
    env = without_settings("EPOCHGATE_", "DAGSTER_")
    env |= {
        "DAGSTER_HOME": str(dagster_home),
        "EPOCHGATE_HOME": str(state),
        "EPOCHGATE_SENSOR_INTERVAL": "2",
        "EPOCHGATE_SPARK": f"sc://{HOST}:{sail_port}",
    }
    dev = launch(tmp_path, env)  # it starts while the Sail server does
    world = Backfills(
        form=form,
        campaign=recorder.campaign("8 concurrent backfills under the daemon"),
        data=data,
        ledger=ledger,
        rt=rt,
        dagster_home=dagster_home,
        dev=dev,
        sail_port=sail_port,
        state=state,
        tally=tally,
        watch=watch,
    )
    try:
        with in_home(state):  # where the server's record is kept
            sail.start(sail_port, echo=lambda _: None, timeout=300)
        dev_serving(dev, timeout=300)
        yield world
    finally:
        if not world.steps.ran(STOPPED):  # a test stopped them, and checked it
            world.stopped()


def test_the_sensor_runs_the_epochs_to_backfill_and_adds_their_partitions(
    backfills: Backfills,
) -> None:
    backfills.first_epochs()
    keys = {epoch_key(e) for e in backfills.form.done}
    assert keys <= set(partition_keys(backfills.dev))


def test_eight_overlapping_backfills_launch_at_once(backfills: Backfills) -> None:
    ids = backfills.launched()
    assert len(set(ids)) == len(backfills.form.ranges)


def test_new_epochs_arrive_and_are_seen_while_the_backfills_run(backfills: Backfills) -> None:
    backfills.arrived()
    keys = {epoch_key(e) for e in backfills.form.arriving}
    assert keys <= set(partition_keys(backfills.dev))
    assert bool(backfills.killed) == backfills.form.kill


def test_every_backfill_ends_and_every_epoch_is_done_with_nothing_stale(
    backfills: Backfills,
) -> None:
    backfills.settled()
    assert set(backfills.statuses) == set(backfills.ids)
    assert all(s in ENDED for s in backfills.statuses.values()), backfills.statuses
    assert all_done(backfills.ledger, backfills.form.epochs)
    assert not backfills.ledger.stale("bank")


def test_every_service_stops_and_nothing_is_left_listening(backfills: Backfills) -> None:
    backfills.settled()
    backfills.stopped()
    dev = backfills.dev
    assert not group_members(dev.process.pid), "processes of dagster dev still running"
    for port in (dev.port, backfills.sail_port):
        # A port freed here may be taken by a server another test starts at the same time.
        ours = [pid for pid in listeners(port) if started_from(pid, backfills.state)]
        assert not ours, f"processes {ours} started by this test still listen on port {port}"


@pytest.mark.skipif(full(), reason="FAULTS=full kills a backfill's run: the test after this")
def test_every_backfill_run_succeeds_once_per_partition(backfills: Backfills) -> None:
    backfills.settled()
    runs, statuses = backfills.runs, backfills.statuses
    failed = [r for r in runs if r["status"] != "SUCCESS"]
    assert failed == [], failed
    assert set(statuses.values()) <= {"COMPLETED", "COMPLETED_SUCCESS"}, statuses
    assert len(backfills.backfill_runs()) == expected_runs(backfills.form)


@pytest.mark.skipif(not full(), reason="only FAULTS=full kills a backfill's run")
def test_the_killed_run_fails_and_is_retried_once_on_another_worker(backfills: Backfills) -> None:
    backfills.settled()
    runs, health = backfills.runs, backfills.health
    ((victim, pid, at),) = backfills.killed
    backfills.campaign.killed("run worker, mid-backfill")
    assert health is not None
    assert health.status == WorkerStatus.FAILED, health
    assert next(r["status"] for r in runs if r["runId"] == victim) == "FAILURE"
    retried = [r for r in runs if tags(r).get("dagster/parent_run_id") == victim]
    assert [r["status"] for r in retried] == ["SUCCESS"], retried
    assert all(int(tags(r)[WORKER_TAG]) != pid for r in retried)
    failed = [r for r in runs if r["status"] != "SUCCESS"]
    assert [r["runId"] for r in failed] == [victim], failed
    assert len(backfills.backfill_runs()) == expected_runs(backfills.form) + 1
    backfills.campaign.recovered(max(r["endTime"] for r in retried) - at)


def test_no_row_is_lost_or_counted_twice_and_no_frontier_moved_back(backfills: Backfills) -> None:
    backfills.settled()
    backfills.stopped()
    tally, rt, watch = backfills.tally, backfills.rt, backfills.watch
    before = {"bank": watch.first}
    invariants.check_moves(tally, before, rt)
    invariants.check_visible(tally, rt)
    invariants.check_outputs(tally, rt, Oracle(backfills.data.root), backfills.form.epochs)
    backfills.campaign.checked(tally)
    assert tally.problems == [], tally.problems
    assert (tally.lost, tally.doubled) == (0, 0)
    assert watch.looks > 3


def expected_runs(form: Form) -> int:
    """One run per partition of every backfill."""
    return sum(last - first + 1 for first, last in form.ranges)
