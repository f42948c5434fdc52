"""Resources: Spark started on first use and stopped only if the run started it; the ledger,
its data and the state store where the Runtime expects them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest
from pyspark.sql import SparkSession

from dagster_project.resources import (
    LedgerResource,
    SparkResource,
    StateStoreResource,
    build_runtime,
)
from pipelines.examples import bank

pytestmark = [pytest.mark.dagster, pytest.mark.spark]


def test_a_run_uses_the_active_session_and_leaves_it_running(
    tmp_path: Path, spark: SparkSession
) -> None:
    seen: list[SparkSession] = []

    @dg.asset
    def uses_spark(spark: SparkResource) -> None:
        seen.append(spark.session())
        seen.append(spark.session())

    result = dg.materialize([uses_spark], resources={"spark": SparkResource(master="local[2]")})
    assert result.success
    assert seen == [spark, spark]
    assert spark.range(3).count() == 3  # not stopped by the run's teardown


def test_a_run_that_never_asks_for_spark_starts_none() -> None:
    @dg.asset
    def no_spark(spark: SparkResource) -> None:
        return None

    resource = SparkResource(master="sc://127.0.0.1:1")  # nothing listens there
    assert dg.materialize([no_spark], resources={"spark": resource}).success


def test_the_runtime_gets_the_ledger_data_and_state_it_is_given(
    tmp_path: Path, spark: SparkSession
) -> None:
    ledger = LedgerResource(path=str(tmp_path / "a" / "ledger.duckdb"), lock_timeout=5.0)
    state = StateStoreResource()
    rt = build_runtime(bank.pipeline(), spark=SparkResource(), ledger=ledger, state=state)
    assert rt.ledger.path == tmp_path.resolve() / "a" / "ledger.duckdb"
    assert rt.ledger.lock_timeout == 5.0
    assert rt.store.root == tmp_path.resolve() / "a" / "data"
    assert rt.state.path == tmp_path.resolve() / "a" / "state.duckdb"
    assert rt.ledger.pipelines() == ["bank"]

    apart = LedgerResource(path=str(tmp_path / "l.duckdb"), data_dir=str(tmp_path / "d"))
    elsewhere = StateStoreResource(path=str(tmp_path / "s.duckdb"))
    nowhere = SparkResource(master="sc://127.0.0.1:1")  # nothing listens there
    rt = build_runtime(bank.pipeline(), spark=nowhere, ledger=apart, state=elsewhere)
    assert rt.store.root == tmp_path.resolve() / "d"
    assert rt.state.path == tmp_path.resolve() / "s.duckdb"
    assert rt.run() == []  # nothing to run: no Spark asked for
    assert not rt.spark_started


STOPS_ITS_SESSION = """
import dagster as dg
from pyspark import SparkContext
from pyspark.sql import SparkSession

from dagster_project.resources import SparkResource

@dg.asset
def uses_spark(spark: SparkResource) -> None:
    assert spark.session().range(3).count() == 3

assert SparkSession.getActiveSession() is None
assert dg.materialize([uses_spark], resources={"spark": SparkResource(master="local[1]")}).success
assert SparkContext._active_spark_context is None, "the run's own session is still running"
print("stopped")
"""


def test_a_run_stops_the_session_it_started(tmp_path: Path) -> None:
    """In a process of its own (this one shares one Spark session for every test)."""
    done = subprocess.run(
        [sys.executable, "-c", STOPS_ITS_SESSION],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "stopped"
