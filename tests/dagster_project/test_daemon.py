"""The bank example under the real Dagster daemon: ``dagster dev`` on the project's workspace.

Two tiny epochs are done before Dagster starts (the CLI's way). Then, at once: a backfill of
every stage over their 2 partitions is launched over GraphQL (the backfill daemon runs it, a run
per partition), and two new epochs are sent and every source closes, which only the frontier
sensor (ticking every 2 s) acts on. The daemon hands each run to one of two warm run workers
(the launcher in the project's ``dagster.yaml``), at most two at once (the ``spark`` pool's
limit there), on one Spark Connect server. The ledger must end with every stage done at every
epoch and none stale, every backfilled output replaced, every Dagster run succeeded, the outputs
equal to the DuckDB-SQL oracle (nothing counted twice), and the asset graph the UI serves equal
to the pipeline's edges. ``dagster dev`` and everything it started are stopped by process group,
and nothing is left on the ports.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from pyspark.sql import SparkSession

from dagster_project.partitions import epoch_key
from pipelines.examples import bank
from pipelines.examples.bank_data import DemoData, Oracle, generate
from pipelines.examples.demo import verify_outputs
from pipelines.run.runtime import Runtime
from pipelines.spark import connect_server
from progress.ledger import Ledger
from tests.dagster_project.browser import (
    VIEWPORT,
    chromium,
    repository,
    sensor_page,
    shown,
    ui_instance,
)
from tests.dagster_project.dagster_dev import (
    REPO,
    DagsterDev,
    group_members,
    launch,
    stop,
    wait_until_serving,
)
from tests.environment import without_settings
from tests.sockets import accepts, free_port
from tests.waiting import wait_until as wait_on

pytestmark = [pytest.mark.dagster, pytest.mark.spark, pytest.mark.browser, pytest.mark.slow(150)]

STAGES = [name for name, stage in bank.pipeline().stages.items() if not stage.is_source]
FINISHED = {"SUCCESS", "FAILURE", "CANCELED"}


def in_home(state: Path) -> AbstractContextManager[object]:
    """``$EPOCHGATE_HOME`` set to ``state`` in this process for a block."""
    return mock.patch.dict(os.environ, {"EPOCHGATE_HOME": str(state)})


@contextmanager
def running_dagster_dev(tmp_path: Path) -> Iterator[tuple[DagsterDev, Path]]:
    """``dagster dev`` on the project's workspace, with its instance and epochgate's state in
    ``tmp_path``, its runs using Spark through a Spark Connect server (one JVM for every run,
    instead of one per run); yields it and the state directory."""
    state = tmp_path / "home"
    connect_port = free_port()
    env = without_settings("EPOCHGATE_", "DAGSTER_")
    dagster_home = ui_instance(tmp_path)  # the project's dagster.yaml: warm run workers
    env |= {
        "DAGSTER_HOME": str(dagster_home),
        "EPOCHGATE_HOME": str(state),
        "EPOCHGATE_SENSOR_INTERVAL": "2",
        "EPOCHGATE_SPARK": connect_server.connect_url(connect_port),
    }
    dev = launch(tmp_path, env)  # it starts while the Connect server does
    try:
        with in_home(state):  # where the runs of dagster dev find the server's token
            connect_server.start(connect_port, echo=lambda _: None, timeout=180)
        wait_until_serving(dev)
        yield dev, state
    finally:
        try:
            stop(dev)
        finally:
            with in_home(state):
                connect_server.stop(connect_port, echo=lambda _: None)
        leftover = group_members(dev.process.pid)
        assert not leftover, f"processes of dagster dev still running: {leftover}"
        assert not accepts(dev.port), f"something still listens on port {dev.port}"
        assert not accepts(connect_port), f"something still listens on port {connect_port}"


def send_epochs(rt: Runtime, data: DemoData, epochs: range | tuple[int, ...]) -> None:
    """Every worker sends each epoch and advances past it."""
    for epoch in epochs:
        for source, workers in bank.WORKERS.items():
            for worker in range(workers):
                for path in data.files(source, epoch, worker):
                    rt.input(source, worker).send(path)
                rt.input(source, worker).advance_to(epoch + 1)


def close_inputs(rt: Runtime) -> None:
    for source, workers in bank.WORKERS.items():
        for worker in range(workers):
            rt.input(source, worker).close()


def most_at_once(runs: list[dict[str, Any]]) -> int:
    """The largest number of runs that were running at the same moment."""
    edges = sorted(
        [(r["startTime"], 1) for r in runs] + [(r["endTime"], -1) for r in runs],
        key=lambda edge: (edge[0], edge[1]),  # an end before a start at the same instant
    )
    running = peak = 0
    for _, step in edges:
        running += step
        peak = max(peak, running)
    return peak


BACKFILLED = range(2)
ARRIVING = (2, 3)
"""Enough runs (a backfill run per partition, at least a sensor run per new epoch: four or
more) for the pool's limit of two to hold some back, the two kinds overlapping; each run takes
a few seconds."""
LAUNCH_BACKFILL = """
mutation Launch($params: LaunchBackfillParams!) {
  launchPartitionBackfill(backfillParams: $params) {
    __typename
    ... on LaunchBackfillSuccess { backfillId }
    ... on PythonError { message }
    ... on InvalidStepError { invalidStepKey }
    ... on InvalidOutputError { stepKey invalidOutputName }
    ... on UnauthorizedError { message }
  }
}
"""
BACKFILL_STATUS = """
query Status($id: String!) {
  partitionBackfillOrError(backfillId: $id) { ... on PartitionBackfill { status } }
}
"""


def wait_until(
    dev: DagsterDev, done: Callable[[], bool], what: str, *, timeout: float = 300
) -> None:
    """Wait until ``done`` holds, failing at once when ``dev`` exits or a run fails."""

    def check() -> None:
        dev.check_alive()
        failed = [r for r in dev.runs() if r["status"] == "FAILURE"]
        assert not failed, f"runs failed: {failed}\n{dev.log_tail()}"

    # Each look asks the webserver twice; every half second is often enough beside runs of seconds.
    wait_on(done, timeout, what, check=check, detail=dev.log_tail, every=0.5)


def test_a_graphql_backfill_of_partitions_while_the_sensor_drives_new_epochs(
    tmp_path: Path, spark: SparkSession, monkeypatch: pytest.MonkeyPatch, chromium_executable: str
) -> None:
    state = tmp_path / "home"
    monkeypatch.setenv("EPOCHGATE_HOME", str(state))
    epochs = len(BACKFILLED) + len(ARRIVING)
    data = generate(tmp_path / "inputs", epochs=epochs, rows=60, accounts=8, seed=12)
    ledger = Ledger(state / "ledger.duckdb")
    rt = Runtime(bank.pipeline(), ledger, spark, state / "data")
    send_epochs(rt, data, BACKFILLED)
    rt.run()
    before = {(s, e): attempts(ledger, s, e) for s in STAGES for e in BACKFILLED}

    with running_dagster_dev(tmp_path) as (dev, _):
        keys = [epoch_key(e) for e in BACKFILLED]

        wait_until(
            dev,
            lambda: set(keys) <= set(partition_keys(dev)),
            "the frontier sensor adds the backfilled partitions",
        )
        # Nothing to run yet: the sensor's ticks are skipped, naming who holds the next epoch,
        # and the tick list in the UI shows it.
        wait_until(
            dev,
            lambda: any(HOLDER in reason for reason in skip_reasons(dev)),
            "a skipped tick naming the input workers that hold epoch 2",
        )
        seen = tick_list(dev, chromium_executable)
        assert seen == [SKIPPED, HOLDER, "Skip reason:"], f"the sensor's ticks show only {seen}"
        launched = dev.graphql(
            LAUNCH_BACKFILL,
            {
                "params": {
                    "partitionNames": keys,
                    "assetSelection": [{"path": ["bank", s]} for s in STAGES],
                    "title": f"backfill of {len(keys)} partitions",
                }
            },
        )["launchPartitionBackfill"]
        assert launched["__typename"] == "LaunchBackfillSuccess", launched
        backfill_id = launched["backfillId"]
        send_epochs(rt, data, ARRIVING)  # new epochs arrive while the backfill runs
        close_inputs(rt)

        def finished() -> bool:
            status = dev.graphql(BACKFILL_STATUS, {"id": backfill_id})
            if status["partitionBackfillOrError"]["status"] not in (
                "COMPLETED",
                "COMPLETED_SUCCESS",
            ):
                return False
            done = {s.stage: s.done for s in ledger.status("bank") if not s.is_input}
            every = all(set(range(epochs)) <= set(done[stage]) for stage in STAGES)
            runs = dev.runs()
            return every and not ledger.stale("bank") and all(r["status"] in FINISHED for r in runs)

        wait_until(dev, finished, "the backfill and the new epochs are done", timeout=480)
        runs = dev.runs()
        nodes = dev.graphql("{ assetNodes { assetKey { path } dependencyKeys { path } } }")

    assert {r["status"] for r in runs} == {"SUCCESS"}
    assert most_at_once(runs) <= 2  # the spark pool's limit, across the backfill and the sensor
    tags = [{t["key"]: t["value"] for t in r["tags"]} for r in runs]
    by_backfill = [t for t in tags if t.get("dagster/backfill") == backfill_id]
    assert sorted(t["dagster/partition"] for t in by_backfill) == keys  # a run per partition
    by_sensor = [t for t in tags if "dagster/backfill" not in t]
    assert all(t["dagster/sensor_name"] == "bank_frontier" for t in by_sensor)
    assert {int(t["epochgate/epoch"]) for t in by_sensor} == set(ARRIVING)
    # Every backfilled output was replaced (revised), and every epoch is counted once.
    for (stage, epoch), old in before.items():
        assert not attempts(ledger, stage, epoch) & old, f"{stage} epoch {epoch} was not revised"
    assert verify_outputs(rt, Oracle(data.root), epochs) == []
    assert ledger.verify().ok

    lineage = {
        tuple(node["assetKey"]["path"]): {tuple(d["path"]) for d in node["dependencyKeys"]}
        for node in nodes["assetNodes"]
    }
    assert lineage == {
        ("bank", name): {("bank", upstream) for upstream in stage.inputs}
        for name, stage in bank.pipeline().stages.items()
    }


HOLDER = "source card_payments, workers 0, 1, 2, still hold epoch 2"
SKIPPED = "0 runs requested"
"""How Dagster's tick list labels a skipped tick."""
"""Part of the skip reason of a tick while every input worker holds epoch 2."""
TICKS = """
query Ticks($selector: SensorSelector!) {
  sensorOrError(sensorSelector: $selector) {
    ... on Sensor { sensorState { ticks(limit: 20) { status skipReason } } }
  }
}
"""
TICKS_SCREENSHOT = REPO / "tests" / "artifacts" / "sensor_ticks.png"


def skip_reasons(dev: DagsterDev) -> list[str]:
    """The skip reasons of the frontier sensor's latest skipped ticks."""
    name, location = repository(dev, sensor="bank_frontier")
    selector = {
        "repositoryName": name,
        "repositoryLocationName": location,
        "sensorName": "bank_frontier",
    }
    found = dev.graphql(TICKS, {"selector": selector})["sensorOrError"]
    ticks = found["sensorState"]["ticks"]
    return [t["skipReason"] or "" for t in ticks if t["status"] == "SKIPPED"]


def tick_list(dev: DagsterDev, executable: str) -> list[str]:
    """What headless Chromium finds on the frontier sensor's page: its skipped ticks (which
    Dagster's tick list labels "0 runs requested"), the skip reason naming who holds the epoch
    over a tick's tag, and again in the tick's dialog."""
    url = sensor_page(dev, "bank_frontier")
    TICKS_SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    seen: list[str] = []
    with chromium(executable) as browser:
        page = browser.new_page(viewport={"width": VIEWPORT["width"], "height": VIEWPORT["height"]})
        try:
            page.goto(url, wait_until="domcontentloaded")
            if shown(page, SKIPPED, timeout=30):
                seen.append(SKIPPED)
                # The list gains a tick every 2 s: a hover or a click can land on a row that has
                # just been redrawn, so the tooltip and the dialog are asked for again (three
                # times at most).
                for _ in range(3):
                    page.get_by_text(SKIPPED, exact=True).first.hover()
                    found = shown(page, HOLDER, timeout=10)
                    page.mouse.move(0, 0)
                    if found:
                        seen.append(HOLDER)
                        break
                for _ in range(3):
                    page.get_by_text(SKIPPED, exact=True).last.click()
                    if shown(page, "Skip reason:", timeout=10) and shown(page, HOLDER, timeout=5):
                        seen.append("Skip reason:")
                        break
        finally:
            page.screenshot(path=TICKS_SCREENSHOT, full_page=True)
    return seen


def attempts(ledger: Ledger, stage: str, epoch: int) -> set[str]:
    """The attempts of the current messages of ``(stage, epoch)``."""
    return {m.attempt for m in ledger.message("bank", stage, 0, epoch)}


def partition_keys(dev: DagsterDev) -> list[str]:
    """The bank epochs the instance has as partitions."""
    data = dev.graphql(
        '{ assetNodeOrError(assetKey: {path: ["bank", "valid_cards"]}) '
        "{ ... on AssetNode { partitionKeys } } }"
    )
    keys: list[str] = data["assetNodeOrError"].get("partitionKeys") or []
    return keys
