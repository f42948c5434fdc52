"""epochgate under a real Airflow 3: the how-to's DAGs (``examples/airflow/shop_dags.py``) and the
tests' own (``dags/edge_dags.py``) run by ``dag.test()`` in one child process on a SQLite
metadata database, against a real ledger and Spark; then Airflow's scheduler starts the DAG
scheduled on the asset.

The module is one scenario taken in steps, each a test that says what it checks:

The tasks find the ledger through the ``epochgate_default`` connection (in the environment, as
JSON), while ``$EPOCHGATE_HOME`` names an empty place.

1. the sensor (deferrable) waits in the triggerer while worker 1 holds epoch 0, naming it; once
   the worker sends, it resumes, the operator runs the epoch (equal to DuckDB SQL over the raw
   files) and emits the asset event with partition key 0;
2. epoch 1, held by worker 1, run without a sensor: the task fails naming the holder, and no
   asset event is emitted;
3. a sensor in poke mode that times out names what holds the epoch; Airflow's providers manager
   finds the provider, its connection type and its triggers;
4. a stage that fails fails the task with the stage, epoch and cause, and nothing of it is
   committed;
5. epoch 1 released: a deferred sensor waiting for it to be final times out in the triggerer
   naming what it waits for; once it is run, the scheduler starts ``shop_report`` once per
   final epoch (0 and 1, each with its partition key), never for epoch 2, which worker 1 still
   holds; the triggerer, watching ``final_epochs``, sends an event for epochs 0 and 1 and none
   for 2, and the scheduler starts ``shop_final`` for them;
6. epoch 2 released and run outside Airflow: the triggerer, started again, goes on after the
   last epoch it sent (kept in the asset's state store) and sends epoch 2 only, which queues a
   run of ``shop_final``.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from pipelines.cli.references import load
from pipelines.run.runtime import Runtime
from progress.ledger import Ledger
from tests.airflow.driver import RESULT
from tests.children import run_in_group
from tests.environment import without_settings
from tests.waiting import wait_until

pytestmark = [pytest.mark.airflow, pytest.mark.spark, pytest.mark.slow(80)]

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "airflow"
DAGS = Path(__file__).resolve().parent / "dags"
HOW_TO = EXAMPLES / "shop_dags.py"
EDGES = DAGS / "edge_dags.py"
AIRFLOW = Path(sys.executable).parent / "airflow"
HOLDER = "source orders, worker 1, still holds epoch {e}"


@dataclass
class Rig:
    """An Airflow home with its database migrated, the epochgate home its tasks use, and the
    driver child that runs DAGs (its output lines gathered by a thread)."""

    root: Path
    env: dict[str, str]
    spark: SparkSession
    driver: subprocess.Popen[str] | None = None
    lines: queue.Queue[str] = field(default_factory=queue.Queue)
    seen: list[str] = field(default_factory=list)

    @property
    def dags(self) -> Path:
        """Airflow's DAG folder: the how-to's files and the tests' own, linked."""
        return self.root / "dags"

    @property
    def database(self) -> Path:
        return self.root / "airflow" / "airflow.db"

    def start_driver(self) -> None:
        self.driver = subprocess.Popen(
            [sys.executable, "-m", "tests.airflow.driver"],
            cwd=REPO,
            env=self.env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,  # its Spark JVM too: the group is killed at the end
        )
        out = self.driver.stdout
        assert out is not None

        def gather() -> None:
            for line in out:
                self.lines.put(line.rstrip("\n"))

        threading.Thread(target=gather, daemon=True).start()

    def stop_driver(self) -> None:
        if self.driver is None:
            return
        try:
            if self.driver.stdin is not None:
                self.driver.stdin.close()
            self.driver.wait(timeout=60)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.driver.pid, signal.SIGKILL)
            self.driver.wait()

    def ask(self, file: Path, dag: str, epoch: int) -> None:
        """Start a run of ``dag`` in ``file`` for ``epoch``."""
        self.tell({"file": str(self.dags / file.name), "dag": dag, "conf": {"epoch": epoch}})

    def tell(self, command: dict[str, Any]) -> None:
        """Give the driver ``command`` (``tests.airflow.driver``)."""
        assert self.driver is not None
        assert self.driver.stdin is not None
        self.seen.clear()
        self.driver.stdin.write(json.dumps(command) + "\n")
        self.driver.stdin.flush()

    def wait_for(self, text: str, timeout: float = 180.0) -> str:
        """The first line of the current run's output containing ``text``."""
        for line in self.seen:
            if text in line:
                return line
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.driver is not None
            try:
                line = self.lines.get(timeout=0.5)
            except queue.Empty:
                if self.driver.poll() is not None:
                    break
                continue
            self.seen.append(line)
            if text in line:
                return line
        tail = "\n".join(self.seen[-60:])
        raise AssertionError(f"no line with {text!r} in the run's output:\n{tail}")

    def result(self) -> dict[str, Any]:
        found: dict[str, Any] = json.loads(self.wait_for(RESULT).split(RESULT, 1)[1])
        return found

    def said(self) -> str:
        return "\n".join(self.seen)

    def runtime(self, reference: str) -> Runtime:
        """The pipeline in this process, on the ledger and data the tasks use."""
        home = self.root / "home"
        return Runtime(load(reference), Ledger(home / "ledger.duckdb"), self.spark, home / "data")

    def query(self, sql: str) -> list[tuple[Any, ...]]:
        with sqlite3.connect(f"file:{self.database}?mode=ro", uri=True) as con:
            return con.execute(sql).fetchall()


def airflow_env(root: Path) -> dict[str, str]:
    home = root / "airflow"
    env = without_settings("EPOCHGATE_", "AIRFLOW_")
    env |= {
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(root / "dags"),
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
        # The tasks find the ledger and the data through the connection, not the environment:
        # $EPOCHGATE_HOME names an empty place.
        "AIRFLOW_CONN_EPOCHGATE_DEFAULT": json.dumps(
            {
                "conn_type": "epochgate",
                "extra": {
                    "ledger": str(root / "home" / "ledger.duckdb"),
                    "data": str(root / "home" / "data"),
                },
            }
        ),
        "EPOCHGATE_HOME": str(root / "elsewhere"),
        "PYTHONPATH": str(root / "dags"),
    }
    return env


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory, spark: SparkSession) -> Iterator[Rig]:
    root = tmp_path_factory.mktemp("airflow")
    env = airflow_env(root)
    (root / "airflow").mkdir()
    (root / "dags").mkdir()
    for source in (*EXAMPLES.glob("*.py"), *DAGS.glob("*.py")):
        (root / "dags" / source.name).symlink_to(source)
    migrated = run_in_group([str(AIRFLOW), "db", "migrate"], cwd=root, env=env, timeout=300)
    assert migrated.returncode == 0, migrated.stdout[-3000:] + migrated.stderr[-3000:]
    sys.path.insert(0, str(root / "dags"))  # where ``shop`` and ``broken`` are, as for Airflow
    made = Rig(root, env, spark)
    made.start_driver()
    try:
        yield made
    finally:
        made.stop_driver()
        sys.path.remove(str(root / "dags"))
        for name, module in list(sys.modules.items()):  # ``shop``, ``broken``: the next test
            if str(getattr(module, "__file__", "")).startswith(str(root)):  # file's names
                del sys.modules[name]


def orders(rig: Rig, worker: int, epoch: int, rows: list[tuple[int, str, float]]) -> Path:
    """A Parquet file of ``rows`` (order id, region, amount) for ``worker`` at ``epoch``."""
    path = rig.root / "raw" / f"orders-w{worker}-e{epoch}.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    ids, regions, amounts = zip(*rows, strict=True)
    table = pa.table(
        {
            "order_id": pa.array(ids, pa.int64()),
            "region": pa.array(regions, pa.string()),
            "amount": pa.array(amounts, pa.float64()),
        }
    )
    pq.write_table(table, path)
    return path


def send(rig: Rig, worker: int, epoch: int, rows: list[tuple[int, str, float]]) -> Path:
    """``worker`` of ``orders`` sends its file of ``epoch`` and advances past it."""
    path = orders(rig, worker, epoch, rows)
    sent = rig.runtime("shop:pipeline").input("orders", worker)
    sent.send(path)
    sent.advance_to(epoch + 1)
    return path


def oracle(files: list[Path]) -> list[tuple[str, float, int]]:
    """``by_region`` in DuckDB SQL over the raw files."""
    found = duckdb.sql(
        "SELECT region, round(sum(amount), 6), count(*) FROM read_parquet($files) "
        "GROUP BY region ORDER BY region",
        params={"files": [str(f) for f in files]},
    ).fetchall()
    return [(r, t, n) for r, t, n in found]


def by_region(rig: Rig, epoch: int) -> list[tuple[str, float, int]]:
    rows = rig.runtime("shop:pipeline").read("by_region", epoch).collect()
    return sorted((r["region"], round(r["total"], 6), r["orders"]) for r in rows)


def events(rig: Rig) -> list[tuple[str, str | None]]:
    """The asset events of ``shop.by_region``: their epoch and partition key."""
    found = rig.query(
        "SELECT e.extra, e.partition_key FROM asset_event e JOIN asset a ON a.id = e.asset_id "
        "WHERE a.uri = 'epochgate://shop/by_region' ORDER BY e.id"
    )
    return [(str(json.loads(extra)["epoch"]), key) for extra, key in found]


FIRST = {0: [(1, "north", 2.5), (2, "south", 4.0)], 1: [(11, "north", 1.0), (12, "east", 3.5)]}


def test_the_sensor_waits_in_the_triggerer_and_the_run_equals_the_oracle(rig: Rig) -> None:
    files = [send(rig, 0, 0, FIRST[0])]
    rig.ask(HOW_TO, "shop_epochs", 0)
    not_ready = rig.wait_for("is not ready")
    assert not_ready.split("[info     ] ", 1)[-1].startswith(
        "pipeline shop, stage by_region, epoch 0 is not ready: " + HOLDER.format(e=0)
    )
    rig.wait_for("Pausing task as DEFERRED")
    rig.wait_for("by_region epoch 0 waits: " + HOLDER.format(e=0))  # the trigger's own look
    files.append(send(rig, 1, 0, FIRST[1]))
    done = rig.result()
    assert (done["state"], done["tasks"]) == ("success", {"wait": "success", "run": "success"})
    assert by_region(rig, 0) == oracle(files)
    assert events(rig) == [("0", "0")]
    assert not (rig.root / "elsewhere").exists()  # the connection's ledger, not $EPOCHGATE_HOME


def test_an_epoch_that_is_not_final_fails_the_run_and_emits_nothing(rig: Rig) -> None:
    send(rig, 0, 1, [(21, "west", 5.0)])
    rig.ask(EDGES, "run_only", 1)
    done = rig.result()
    assert (done["state"], done["tasks"]) == ("failed", {"run": "failed"})
    assert "by_region epoch 1 waits: " + HOLDER.format(e=1) in rig.said()
    assert (
        "pipeline shop, stage by_region, epoch 1 is not final: " + HOLDER.format(e=1) in rig.said()
    )
    assert events(rig) == [("0", "0")]


def test_a_sensor_that_times_out_names_what_holds_the_epoch(rig: Rig) -> None:
    rig.ask(EDGES, "poke_wait", 1)
    done = rig.result()
    assert (done["state"], done["tasks"]) == ("failed", {"wait": "failed"})
    timed_out = rig.wait_for("AirflowSensorTimeout")
    assert "epoch 1 is not ready: " + HOLDER.format(e=1) in timed_out + rig.said()


def test_airflow_finds_the_provider_its_connection_type_and_triggers(rig: Rig) -> None:
    rig.tell({"providers": True})
    assert rig.result() == {
        "provider": "epochgate",
        "hook": "pipelines.airflow.hooks.EpochgateHook",
        "triggers": ["pipelines.airflow.triggers"],
    }


def test_a_failing_stage_fails_the_task_with_its_cause_and_commits_nothing(rig: Rig) -> None:
    broken = rig.runtime("broken:pipeline")
    path = rig.root / "raw" / "broken-e0.parquet"
    pq.write_table(pa.table({"order_id": [1, 2], "region": ["north", None]}), path)
    broken.input("orders", 0).send(path)
    broken.input("orders", 0).advance_to(1)
    rig.ask(EDGES, "broken_run", 0)
    done = rig.result()
    assert (done["state"], done["tasks"]) == ("failed", {"run": "failed"})
    said = rig.said()
    cause = "stage 'checked', epoch 0 failed: 1 order(s) without a region; nothing was committed"
    assert f"AirflowFailException: {cause}" in said, said[-3000:]
    assert list(broken.ledger.done_epochs("broken", "checked")) == []


def test_the_report_runs_once_per_final_epoch_and_never_for_an_unfinished_one(rig: Rig) -> None:
    send(rig, 1, 1, [(31, "east", 2.0)])
    send(rig, 0, 2, [(41, "north", 9.0)])  # epoch 2: worker 1 still holds it
    rig.ask(EDGES, "final_wait", 1)  # ready, not run: not final
    done = rig.result()
    assert (done["state"], done["tasks"]) == ("failed", {"wait": "failed"})
    said = rig.said()
    assert "Pausing task as DEFERRED" in said
    assert "timed out: pipeline shop, stage by_region, epoch 1 is not final: " in said, said[-3000:]
    rig.ask(HOW_TO, "shop_epochs", 1)
    assert rig.result()["state"] == "success"
    rig.ask(EDGES, "run_only", 2)
    assert rig.result()["state"] == "failed"
    assert events(rig) == [("0", "0"), ("1", "1")]
    with triggerer(rig) as process:
        wait_watched(rig, process, [0, 1])
    assert watched(rig) == [0, 1]  # none for epoch 2, which worker 1 held all along
    assert sent(rig) == {"epochgate.sent": 1}
    scheduled = run_in_group(
        [str(AIRFLOW), "scheduler", "--num-runs", "4", "--skip-serve-logs"],
        cwd=rig.root,
        env=rig.env,
        timeout=240,
    )
    assert scheduled.returncode == 0, scheduled.stdout[-3000:] + scheduled.stderr[-3000:]
    runs = rig.query(
        "SELECT partition_key, state FROM dag_run WHERE dag_id = 'shop_report' ORDER BY 1"
    )
    assert runs == [("0", "success"), ("1", "success")]
    consumed = final_runs(rig)  # an event that came while its run was made waits for the next
    assert consumed in ([0], [0, 1]), consumed


FINAL_URI = "epochgate://shop/by_region/final"


@contextlib.contextmanager
def triggerer(rig: Rig) -> Iterator[subprocess.Popen[str]]:
    """``airflow triggerer`` on the rig's home, in a process group stopped (and then killed) when
    the block ends; its output goes to a log file beside the home."""
    log = (rig.root / f"triggerer-{time.monotonic_ns()}.log").open("w")
    process = subprocess.Popen(
        [str(AIRFLOW), "triggerer", "--skip-serve-logs"],
        cwd=rig.root,
        env=rig.env,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        yield process
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            log.close()


def watched(rig: Rig) -> list[int]:
    """The epochs of the events the watcher of ``shop.by_region.final`` sent, in order."""
    found = rig.query(
        "SELECT e.extra FROM asset_event e JOIN asset a ON a.id = e.asset_id "
        f"WHERE a.uri = '{FINAL_URI}' ORDER BY e.id"
    )
    return [int(json.loads(extra)["payload"]["epoch"]) for (extra,) in found]


def wait_watched(rig: Rig, process: subprocess.Popen[str], epochs: list[int]) -> None:
    """Wait until the watcher has sent the events of ``epochs``, failing at once when the
    triggerer ends or an event beyond them comes."""

    def check() -> None:
        assert process.poll() is None, f"the triggerer ended ({process.returncode})"
        assert len(watched(rig)) <= len(epochs), watched(rig)

    wait_until(
        lambda: watched(rig) == epochs,
        120,
        f"events of epochs {epochs}",
        every=0.5,
        check=check,
        detail=lambda: f"events of epochs {watched(rig)}",
    )


def sent(rig: Rig) -> dict[str, Any]:
    """What the watched asset's state store holds: the watcher's cursor."""
    found = rig.query(
        "SELECT s.key, s.value FROM asset_state_store s JOIN asset a ON a.id = s.asset_id "
        f"WHERE a.uri = '{FINAL_URI}'"
    )
    return {key: json.loads(value) for key, value in found}


def final_runs(rig: Rig) -> list[int]:
    """The epochs of the watcher's events that runs of ``shop_final`` were started for, each
    run successful."""
    states = rig.query("SELECT state FROM dag_run WHERE dag_id = 'shop_final'")
    assert {state for (state,) in states} == {"success"}, states
    found = rig.query(
        "SELECT e.extra FROM dagrun_asset_event x JOIN dag_run r ON r.id = x.dag_run_id "
        "JOIN asset_event e ON e.id = x.event_id WHERE r.dag_id = 'shop_final'"
    )
    return sorted(int(json.loads(extra)["payload"]["epoch"]) for (extra,) in found)


def test_a_restarted_triggerer_sends_only_the_epochs_after_the_last_it_sent(rig: Rig) -> None:
    send(rig, 1, 2, [(42, "south", 1.5)])
    rig.runtime("shop:pipeline").run()  # epoch 2 final, run outside Airflow
    with triggerer(rig) as process:
        wait_watched(rig, process, [0, 1, 2])  # epochs 0 and 1 are not sent again
    assert sent(rig) == {"epochgate.sent": 2}
    queued = rig.query("SELECT target_dag_id FROM asset_dag_run_queue")
    assert queued == [("shop_final",)]  # the scheduler's next loop starts its run
