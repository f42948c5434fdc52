"""Hostile input through Dagster, on a real instance: partition keys that are not epoch keys,
an upquery run's config naming a stage that is not a partial stage of the pipeline (quotes,
SQL, ``..``), and a ledger resource whose file is not a DuckDB database. Each run fails with a
step failure that names the key, the stage or the file, and commits nothing. No stage runs, so
no Spark starts."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from dagster_project.definitions import build_definitions
from dagster_project.names import job_name, upquery_job_name, upquery_op_name
from dagster_project.partitions import epoch_key, partitions_name
from dagster_project.resources import LedgerResource, SparkResource
from pipelines.run.runtime import Runtime
from tests.faults import hostile
from tests.faults.hostile import ROWS, check_nothing_committed, committed
from tests.faults.invariants import Tally
from tests.faults.recorder import Recorder

pytestmark = [pytest.mark.faults, pytest.mark.dagster]


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.instance_for_test() as instance:
        yield instance


def no_spark() -> Any:
    raise AssertionError("a refused run starts no Spark")


def _defs(ledger: LedgerResource) -> dg.Definitions:
    return build_definitions(
        [hostile.pipeline()],
        spark=SparkResource(master="local[2]"),
        ledger=ledger,
        sensor_status=dg.DefaultSensorStatus.STOPPED,
    )


@pytest.fixture
def home(tmp_path: Path) -> tuple[Runtime, dg.Definitions]:
    """``hostile`` with epoch 0 sent and closed, nothing run; its Definitions."""
    ledger = LedgerResource(path=str(tmp_path / "ledger.duckdb"))
    rt = Runtime(hostile.pipeline(), ledger.ledger(), no_spark, ledger.data_root)
    rt.input("moves").send(hostile.write(tmp_path / "epoch0.parquet", ROWS))
    rt.input("moves").close()
    return rt, _defs(ledger)


def _failure(result: dg.ExecuteInProcessResult) -> str:
    assert not result.success
    failures = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    assert failures
    return str(failures[0].step_failure_data.error)


BAD_KEYS = ["../000000001", "00000000000'", "-00000000001", "9" * 20, "\uff10" * 11 + "\uff11"]


def test_a_partition_key_that_is_not_an_epoch_key_fails_its_run(
    home: tuple[Runtime, dg.Definitions], instance: dg.DagsterInstance, recorder: Recorder
) -> None:
    rt, defs = home
    tally = Tally()
    instance.add_dynamic_partitions(partitions_name("hostile"), [*BAD_KEYS, epoch_key(0)])
    job = defs.resolve_job_def(job_name("hostile"))
    for key in BAD_KEYS:
        before = committed(rt)
        result = job.execute_in_process(instance=instance, partition_key=key, raise_on_error=False)
        message = _failure(result)
        assert f"partition key {key!r} is not an epoch key" in message, message
        check_nothing_committed(tally, rt, before, f"partition {key!r}")
    recorder.campaign("hostile input").checked(tally)
    assert tally.problems == []


BAD_STAGES = ["'; DROP TABLE upqueries; --", "../per_name", "per_name/..", "per_id", "zoë"]


@pytest.mark.parametrize("stage", BAD_STAGES)
def test_an_upquery_run_config_naming_no_partial_stage_fails_naming_it(
    home: tuple[Runtime, dg.Definitions],
    instance: dg.DagsterInstance,
    stage: str,
    recorder: Recorder,
) -> None:
    rt, defs = home
    tally = Tally()
    before = committed(rt)
    job = defs.resolve_job_def(upquery_job_name("hostile"))
    config = {"ops": {upquery_op_name("hostile"): {"config": {"stage": stage}}}}
    message = _failure(
        job.execute_in_process(run_config=config, instance=instance, raise_on_error=False)
    )
    assert repr(stage) in message, message
    check_nothing_committed(tally, rt, before, f"upquery config {stage!r}")
    recorder.campaign("hostile input").checked(tally)
    assert tally.problems == []


@pytest.mark.parametrize("content", [b"", b"SQLite format 3\x00" + os.urandom(2000)], ids=len)
def test_a_ledger_resource_on_a_file_that_is_no_database_fails_naming_it(
    tmp_path: Path, instance: dg.DagsterInstance, content: bytes
) -> None:
    bad = tmp_path / "ledger.duckdb"
    bad.write_bytes(content)
    defs = _defs(LedgerResource(path=str(bad)))
    instance.add_dynamic_partitions(partitions_name("hostile"), [epoch_key(0)])
    job = defs.resolve_job_def(job_name("hostile"))
    result = job.execute_in_process(
        instance=instance, partition_key=epoch_key(0), raise_on_error=False
    )
    message = _failure(result)
    assert f"database file {bad} cannot be opened" in message, message
    assert bad.read_bytes() == content  # left as it was
