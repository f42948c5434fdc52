"""The warm run launcher under the real daemon: ``dagster dev`` on the project's workspace with
the project's ``dagster.yaml`` (``WarmRunLauncher``, here with one worker and a local Spark
session in it).

The frontier sensor's runs of the first epoch are executed by the warm worker: they succeed,
record a materialization per stage and partition, and their event logs hold the engine event
Dagster's own execution writes (``Started process for run``, with the worker's pid). The worker
is killed while it executes the second epoch's run: that run is marked failed, a new worker
takes its place, and a re-execution of the run (as from the UI) succeeds on it; the outputs of
every epoch equal the DuckDB-SQL oracle. After ``dagster dev`` stops, no worker is left (by
pid) and nothing listens on its port.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from pyspark.sql import SparkSession

from dagster_project.dev.instance import instance_home
from dagster_project.dev.run_timeline import IN_PROCESS, run_timeline
from dagster_project.names import EPOCH_TAG, WORKER_TAG, stage_key
from dagster_project.partitions import epoch_key
from pipelines.examples import bank
from pipelines.examples.bank_data import DemoData, Oracle, generate
from pipelines.examples.demo import verify_outputs
from pipelines.run.runtime import Runtime
from progress.ledger import Ledger
from tests.dagster_project.dagster_dev import (
    DagsterDev,
    group_members,
    launch,
    stop,
    wait_until_serving,
)
from tests.dagster_project.test_daemon import STAGES
from tests.environment import without_settings
from tests.sockets import accepts
from tests.waiting import wait_until

pytestmark = [
    pytest.mark.dagster,
    pytest.mark.spark,
    pytest.mark.timeout(1200),
    pytest.mark.slow(65),
]

REEXECUTE = """
mutation Reexecute($params: ReexecutionParams!) {
  launchRunReexecution(reexecutionParams: $params) {
    __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on PythonError { message }
  }
}
"""


def wait_for(dev: DagsterDev, what: str, done: Callable[[], bool], timeout: float = 600) -> None:
    """Wait until ``done`` holds, failing at once when ``dev`` exits. Looked at twice a second:
    each look is a GraphQL query or a ledger session, which the runs are waiting on too."""
    wait_until(done, timeout, what, check=dev.check_alive, detail=dev.log_tail, every=0.5)


def send_epoch(rt: Runtime, data: DemoData, epoch: int) -> None:
    """Every worker sends its files for ``epoch``, then every worker advances past it (so the
    frontier sensor finds the whole epoch ready at once: one run)."""
    for source, workers in bank.WORKERS.items():
        for worker in range(workers):
            for path in data.files(source, epoch, worker):
                rt.input(source, worker).send(path)
    for source, workers in bank.WORKERS.items():
        for worker in range(workers):
            rt.input(source, worker).advance_to(epoch + 1)


def tags(run: dict[str, Any]) -> dict[str, str]:
    return {t["key"]: t["value"] for t in run["tags"]}


def alive(pid: int) -> bool:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] not in ("Z", "X")


def test_runs_go_to_a_warm_worker_and_a_killed_worker_fails_only_its_run(
    tmp_path: Path, spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = tmp_path / "home"
    monkeypatch.setenv("EPOCHGATE_HOME", str(state))
    data = generate(tmp_path / "inputs", epochs=2, rows=60, accounts=8, seed=14)
    ledger = Ledger(state / "ledger.duckdb")
    rt = Runtime(bank.pipeline(), ledger, spark, state / "data")

    home = instance_home(tmp_path)  # the project's dagster.yaml, with one worker
    config = home / "dagster.yaml"
    assert "class: WarmRunLauncher" in config.read_text()
    config.write_text(config.read_text().replace("workers: 2", "workers: 1"))
    env = without_settings("EPOCHGATE_", "DAGSTER_")
    env |= {
        "DAGSTER_HOME": str(home),
        "EPOCHGATE_HOME": str(state),
        "EPOCHGATE_SENSOR_INTERVAL": "1",
    }

    def done(epoch: int) -> Callable[[], bool]:
        def check() -> bool:
            status = {s.stage: s.done for s in ledger.status("bank") if not s.is_input}
            return all(epoch in status[stage] for stage in STAGES)

        return check

    dev = launch(tmp_path, env)
    workers: set[int] = set()
    try:
        wait_until_serving(dev)
        send_epoch(rt, data, 0)
        wait_for(dev, "epoch 0 done", done(0))
        wait_for(dev, "epoch 0's runs end", lambda: all(r["endTime"] for r in dev.runs()))
        first = dev.runs()
        assert {r["status"] for r in first} == {"SUCCESS"}
        workers |= {int(tags(r)[WORKER_TAG]) for r in first}
        assert len(workers) == 1
        (worker,) = workers
        assert alive(worker)

        with dg.DagsterInstance.from_config(str(home)) as instance:
            for run in first:
                timeline = run_timeline(instance, run["runId"])
                labels = [p.label for p in timeline.parts]
                assert "until its process has it (start, imports)" in labels
                logs = instance.all_logs(run["runId"])
                engine = [e.message for e in logs if e.message.startswith(IN_PROCESS)]
                assert engine == [f"{IN_PROCESS} (pid: {worker})."]
            for stage in STAGES:
                event = instance.get_latest_materialization_event(stage_key("bank", stage))
                assert event is not None, stage
                assert event.run_id in {r["runId"] for r in first}
                assert event.asset_materialization is not None
                assert event.asset_materialization.partition == epoch_key(0)

        # The worker dies while it executes epoch 1's run.
        send_epoch(rt, data, 1)
        killed: list[str] = []

        def started() -> bool:
            for run in dev.runs():
                if tags(run).get(EPOCH_TAG) == "1" and run["status"] == "STARTED":
                    os.kill(int(tags(run)[WORKER_TAG]), signal.SIGKILL)
                    killed.append(run["runId"])
                    return True
            return False

        wait_for(dev, "epoch 1's run starts", started)
        (victim,) = killed

        def status(run_id: str) -> str:
            return next(str(r["status"]) for r in dev.runs() if r["runId"] == run_id)

        wait_for(dev, "the killed worker's run ends", lambda: status(victim) != "STARTED")
        assert status(victim) == "FAILURE"
        assert not alive(worker)

        relaunched = dev.graphql(
            REEXECUTE, {"params": {"parentRunId": victim, "strategy": "ALL_STEPS"}}
        )["launchRunReexecution"]
        assert relaunched["__typename"] == "LaunchRunSuccess", relaunched
        again = relaunched["run"]["runId"]
        wait_for(dev, "the re-execution ends", lambda: status(again) in ("SUCCESS", "FAILURE"))
        assert status(again) == "SUCCESS", dev.log_tail()
        wait_for(dev, "epoch 1 done", done(1))
        runs = dev.runs()
        workers |= {int(tags(r)[WORKER_TAG]) for r in runs}
        replacement = int(next(tags(r)[WORKER_TAG] for r in runs if r["runId"] == again))
        assert replacement != worker
        assert alive(replacement)
    finally:
        stop(dev)
    assert not group_members(dev.process.pid)
    assert not [pid for pid in workers if alive(pid)], "a run worker outlived the daemon"
    assert not accepts(dev.port)
    assert verify_outputs(rt, Oracle(data.root), 2, accounts=()) == []
    assert ledger.verify().ok
