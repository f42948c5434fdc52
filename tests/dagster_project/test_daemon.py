"""The bank example under the real Dagster daemon: ``dagster dev`` on the project's workspace.

Three tiny epochs are sent and every source closes; from then on only the frontier sensor acts
(ticking every 2 s), and the daemon launches each requested run in its own process, at most two
at once (the ``spark`` pool's limit in the project's ``dagster.yaml``). The ledger must end with
every stage done at every epoch, every Dagster run succeeded, the outputs equal to the DuckDB-SQL
oracle, and the asset graph the UI serves equal to the pipeline's edges. ``dagster dev`` and
everything it started are stopped by process group, and nothing is left on the port.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
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
from tests.sockets import accepts, free_port

pytestmark = [pytest.mark.dagster, pytest.mark.spark]

REPO = Path(__file__).resolve().parents[2]
DAGSTER = Path(sys.executable).parent / "dagster"
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


def group_members(pgid: int) -> list[int]:
    """The live (not zombie) processes of a process group."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            found.append(int(stat.parent.name))
    return found


@dataclass
class DagsterDev:
    """A running ``dagster dev``: its process (a process group leader), port and log."""

    process: subprocess.Popen[bytes]
    port: int
    log: Path

    def graphql(self, query: str) -> dict[str, Any]:
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/graphql",
            data=json.dumps({"query": query}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            body = json.loads(response.read())
        assert "errors" not in body, body["errors"]
        data: dict[str, Any] = body["data"]
        return data

    def runs(self) -> list[dict[str, Any]]:
        data = self.graphql(
            "{ runsOrError { ... on Runs { results { runId status startTime endTime "
            "tags { key value } } } ... on PythonError { message } } }"
        )
        found = data["runsOrError"]
        assert "results" in found, found
        runs: list[dict[str, Any]] = found["results"]
        return runs

    def log_tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-40:])

    def check_alive(self) -> None:
        if self.process.poll() is not None:
            pytest.fail(f"dagster dev exited ({self.process.returncode}):\n{self.log_tail()}")


def launch(workdir: Path, env: dict[str, str]) -> DagsterDev:
    """``dagster dev`` in its own process group, SIGINT at its default so SIGTERM stops it."""
    port, log = free_port(), workdir / "dagster-dev.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                str(DAGSTER),
                *("dev", "-w", str(REPO / "workspace.yaml")),
                *("-h", "127.0.0.1", "-p", str(port)),
            ],
            cwd=workdir,  # no file here can shadow a package on the import path
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # noqa: PLW1509
        )
    return DagsterDev(process, port, log)


def wait_until_serving(dev: DagsterDev, *, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        dev.check_alive()
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{dev.port}/server_info", timeout=5):
                return
        except (urllib.error.URLError, OSError):
            assert time.monotonic() < deadline, f"no answer in {timeout:.0f}s:\n{dev.log_tail()}"
            time.sleep(0.5)


def stop(dev: DagsterDev, *, timeout: float = 30.0) -> None:
    """SIGTERM to the process group, then SIGKILL to whatever is left of it after ``timeout``."""
    pgid = dev.process.pid
    if group_members(pgid):
        os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while group_members(pgid) and time.monotonic() < deadline:
        dev.process.poll()  # reap the leader once it exits
        time.sleep(0.2)
    if group_members(pgid):
        os.killpg(pgid, signal.SIGKILL)
        time.sleep(1.0)
    dev.process.wait(timeout=10)


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
