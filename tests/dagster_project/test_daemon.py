"""The bank example under the real Dagster daemon: ``dagster dev`` on the project's workspace.

Three tiny epochs are sent and every source closes; from then on only the frontier sensor acts
(ticking every 2 s), and the daemon launches each requested run in its own process, at most two
at once (the ``spark`` pool's limit in the project's ``dagster.yaml``). The ledger must end with
every stage done at every epoch, every Dagster run succeeded, the outputs equal to the DuckDB-SQL
oracle, and the asset graph the UI serves equal to the pipeline's edges. ``dagster dev`` and
everything it started are stopped by process group, and nothing is left on the port.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from dagster_project.demo import instance_home
from pipelines import connect_server
from pipelines.examples import bank
from pipelines.examples.bank_data import DemoData, Oracle, generate
from pipelines.examples.demo import verify_outputs
from pipelines.runtime import Runtime
from progress.ledger import Ledger
from tests.dagster_project.dagster_dev import (
    DagsterDev,
    group_members,
    launch,
    stop,
    wait_until_serving,
)
from tests.sockets import accepts, free_port

pytestmark = [pytest.mark.dagster, pytest.mark.spark]

EPOCHS = (0, 1, 2)
STAGES = [name for name, stage in bank.pipeline().stages.items() if not stage.is_source]
FINISHED = {"SUCCESS", "FAILURE", "CANCELED"}
FAST_QUEUE = """
run_coordinator:
  module: dagster.core.run_coordinator
  class: QueuedRunCoordinator
  config:
    dequeue_interval_seconds: 1
"""
"""Added to the test instance's settings: the queue launches a run within a second (not five)."""


@pytest.fixture
def dagster_dev(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[DagsterDev, Path]]:
    """``dagster dev`` on the project's workspace, with its instance and epochgate's state in
    ``tmp_path``, its runs using Spark through a Spark Connect server (one JVM for every run,
    instead of one per run); yields it and the state directory."""
    state = tmp_path / "home"
    monkeypatch.setenv("EPOCHGATE_HOME", str(state))  # where the Connect server keeps its files
    connect_port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EPOCHGATE_", "DAGSTER_"))}
    dagster_home = instance_home(tmp_path)  # with the project's dagster.yaml
    with (dagster_home / "dagster.yaml").open("a") as config:
        config.write(FAST_QUEUE)
    env |= {
        "DAGSTER_HOME": str(dagster_home),
        "EPOCHGATE_HOME": str(state),
        "EPOCHGATE_SENSOR_INTERVAL": "2",
        "EPOCHGATE_SPARK": connect_server.connect_url(connect_port),
    }
    dev = launch(tmp_path, env)  # it starts while the Connect server does
    try:
        connect_server.start(connect_port, echo=lambda _: None, timeout=180)
        wait_until_serving(dev)
        yield dev, state
    finally:
        try:
            stop(dev)
        finally:
            connect_server.stop(connect_port, echo=lambda _: None)
        leftover = group_members(dev.process.pid)
        assert not leftover, f"processes of dagster dev still running: {leftover}"
        assert not accepts(dev.port), f"something still listens on port {dev.port}"
        assert not accepts(connect_port), f"something still listens on port {connect_port}"


def send_everything(rt: Runtime, data: DemoData) -> None:
    """Every worker sends each epoch and advances past it; then every worker closes."""
    for epoch in EPOCHS:
        for source, workers in bank.WORKERS.items():
            for worker in range(workers):
                for path in data.files(source, epoch, worker):
                    rt.input(source, worker).send(path)
                rt.input(source, worker).advance_to(epoch + 1)
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


def test_the_daemon_runs_every_epoch_through_the_sensor(
    dagster_dev: tuple[DagsterDev, Path], tmp_path: Path, spark: SparkSession
) -> None:
    dev, state = dagster_dev
    data = generate(tmp_path / "inputs", epochs=len(EPOCHS), rows=120, accounts=12, seed=11)
    ledger = Ledger(state / "ledger.duckdb")
    rt = Runtime(bank.pipeline(), ledger, spark, state / "data")
    send_everything(rt, data)

    # From here on the sensor and the daemon do everything.
    deadline = time.monotonic() + 360
    while True:
        dev.check_alive()
        failed = [r for r in dev.runs() if r["status"] == "FAILURE"]
        assert not failed, f"runs failed: {failed}\n{dev.log_tail()}"
        done = {s.stage: s.done for s in ledger.status("bank") if not s.is_input}
        if all(set(EPOCHS) <= set(done[stage]) for stage in STAGES):
            break
        assert time.monotonic() < deadline, f"not done after 6 minutes: {done}"
        time.sleep(2)

    # A run commits to the ledger before Dagster records its end: wait for every run's end.
    runs = dev.runs()
    while not all(r["status"] in FINISHED for r in runs):
        assert time.monotonic() < deadline, f"runs still in flight: {runs}"
        time.sleep(1)
        runs = dev.runs()
    assert runs
    assert {r["status"] for r in runs} == {"SUCCESS"}
    assert all({"key": "dagster/sensor_name", "value": "bank_frontier"} in r["tags"] for r in runs)
    assert most_at_once(runs) <= 2  # the spark pool's limit

    assert verify_outputs(rt, Oracle(data.root), len(EPOCHS)) == []
    assert ledger.verify().ok

    nodes = dev.graphql("{ assetNodes { assetKey { path } dependencyKeys { path } } }")
    lineage = {
        tuple(node["assetKey"]["path"]): {tuple(d["path"]) for d in node["dependencyKeys"]}
        for node in nodes["assetNodes"]
    }
    assert lineage == {
        ("bank", name): {("bank", upstream) for upstream in stage.inputs}
        for name, stage in bank.pipeline().stages.items()
    }
