"""Partition backfills under Dagster: the runs a backfill launches revise done epochs (never
"done already"), the frontier sensor re-runs exactly the downstream work they made stale and
leaves alone what the backfill will still run, a stateful stage is recomputed once per backfill,
and a partition whose inputs are not complete fails at once with its blockers.

The backfill's runs are executed here as the backfill daemon launches them: partitioned runs of
the pipeline's job tagged with the backfill's id (the daemon end-to-end test launches a real one
over GraphQL).
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.execution.backfill import BulkActionStatus, PartitionBackfill
from pyspark.sql import SparkSession

from dagster_project.in_flight import backfill_stages
from dagster_project.names import BACKFILL_TAG, check_key, stage_key
from dagster_project.partitions import epoch_key, partitions_name
from pipelines.examples import bank
from pipelines.examples.bank_data import Oracle
from pipelines.examples.demo import verify_outputs
from tests.dagster_project.driver import requested
from tests.dagster_project.scenario import Bank

pytestmark = [pytest.mark.dagster, pytest.mark.spark]


def backfill_run(home: Bank, backfill: str, epoch: int, *stages: str) -> dg.ExecuteInProcessResult:
    """One run of a backfill: ``stages`` at ``epoch``, tagged as the backfill daemon tags it."""
    return home.drive.execute(
        dg.RunRequest(
            partition_key=epoch_key(epoch),
            asset_selection=[stage_key("bank", s) for s in stages],
            asset_check_keys=[check_key("bank", s) for s in stages],
            tags={BACKFILL_TAG: backfill},
        ),
        raise_on_error=False,
    )


def statuses(run: dg.ExecuteInProcessResult) -> dict[tuple[str, str | None], object]:
    """Each materialization of a run: ``(stage, partition) -> its status metadata``."""
    return {
        (e.materialization.asset_key.path[1], e.partition): e.materialization.metadata[
            "status"
        ].value
        for e in run.get_asset_materialization_events()
    }


def attempts(home: Bank, stage: str, epoch: int) -> list[str]:
    """Every attempt committed for ``(stage, epoch)``, oldest first."""
    history = home.ledger.ledger().history("bank", stage, epoch)
    return [m.attempt for m in history.messages]


def add_backfill(
    home: Bank, backfill_id: str, epochs: list[int], stages: list[str]
) -> PartitionBackfill:
    """A requested asset backfill of ``stages`` over ``epochs``, as the UI would add it."""
    instance = home.drive.instance
    backfill = PartitionBackfill.from_asset_partitions(
        backfill_id=backfill_id,
        asset_graph=home.defs.resolve_asset_graph(),
        partition_names=[epoch_key(e) for e in epochs],
        asset_selection=[stage_key("bank", s) for s in stages],
        backfill_timestamp=time.time(),
        tags={},
        dynamic_partitions_store=instance,
        all_partitions=False,
        title=None,
        description=None,
        run_config=None,
    )
    instance.add_backfill(backfill)
    return backfill


@pytest.fixture(scope="module")
def done_root(tmp_path_factory: pytest.TempPathFactory, spark: SparkSession) -> Path:
    """A bank home with both epochs sent, every input closed, and every stage done through the
    sensor: driven once, for the tests to copy (a revision writes new attempts under the copy
    and leaves the files of this one alone)."""
    root = tmp_path_factory.mktemp("backfill")
    with dg.instance_for_test() as instance:
        home = Bank.create(root, spark, instance)
        home.send_epoch(0)
        home.send_epoch(1)
        home.close_inputs()
        home.drive.drive()
        assert home.ledger.ledger().stale("bank") == []
    return root


@pytest.fixture
def done(
    done_root: Path, tmp_path: Path, spark: SparkSession, instance: dg.DagsterInstance
) -> Bank:
    """A copy of ``done_root`` on a new instance that has its two partitions."""
    shutil.copytree(done_root, tmp_path, dirs_exist_ok=True)
    instance.add_dynamic_partitions(partitions_name("bank"), [epoch_key(0), epoch_key(1)])
    return Bank.create(tmp_path, spark, instance)


def test_a_backfill_revises_done_epochs_and_the_sensor_reruns_the_stale_ones(done: Bank) -> None:
    instance = done.drive.instance
    targets = ["valid_cards", "movements"]
    backfill = add_backfill(done, "b1", [0, 1], targets)
    assert backfill_stages(instance, bank.pipeline()) == {0: set(targets), 1: set(targets)}
    before = {e: attempts(done, "valid_cards", e) for e in (0, 1)}

    first = backfill_run(done, "b1", 0, *targets)
    assert first.success
    assert statuses(first) == {(s, epoch_key(0)): "revised" for s in targets}
    assert all(check.passed for check in first.get_asset_check_evaluations())
    # Exactly the stale work, except what the backfill has yet to run: what read movements 0,
    # and region_totals, which reads enriched (the same run revises enriched first).
    stale = {"category_totals", "balances", "enriched", "region_totals"}
    assert requested(done.drive.tick()) == [(0, stale)]
    assert backfill_run(done, "b1", 1, *targets).success
    finished = backfill.with_status(BulkActionStatus.COMPLETED_SUCCESS)  # type: ignore[no-untyped-call]
    instance.update_backfill(finished)
    assert backfill_stages(instance, bank.pipeline()) == {}
    for epoch in (0, 1):
        now = attempts(done, "valid_cards", epoch)
        assert len(now) == len(before[epoch]) + 1  # a new attempt replaced the old one

    done.drive.drive()
    assert done.ledger.ledger().stale("bank") == []
    assert verify_outputs(done.rt, Oracle(done.data.root), 2) == []  # nothing counted twice
    assert done.ledger.ledger().verify().ok


def test_a_stateful_stage_is_recomputed_once_per_backfill(done: Bank) -> None:
    before = {e: len(attempts(done, "balances", e)) for e in (0, 1)}
    first = backfill_run(done, "b2", 0, "balances")
    assert first.success
    # Revising epoch 0 recomputed epoch 1 from the new state: both are recorded.
    assert statuses(first) == {
        ("balances", epoch_key(0)): "revised",
        ("balances", epoch_key(1)): "revised",
    }
    second = backfill_run(done, "b2", 1, "balances")
    assert second.success
    assert statuses(second) == {("balances", epoch_key(1)): "done-already"}
    assert {e: len(attempts(done, "balances", e)) for e in (0, 1)} == {
        0: before[0] + 1,
        1: before[1] + 1,
    }
    # Another backfill recomputes it again.
    third = backfill_run(done, "b3", 1, "balances")
    assert statuses(third) == {("balances", epoch_key(1)): "revised"}
    assert len(attempts(done, "balances", 1)) == before[1] + 2
    assert done.ledger.ledger().stale("bank") == []
    assert verify_outputs(done.rt, Oracle(done.data.root), 2) == []


def test_a_backfilled_partition_whose_input_is_not_complete_fails_with_its_blockers(
    bank_home: Bank,
) -> None:
    bank_home.send_epoch(0, hold=True)
    bank_home.drive.tick()  # adds the partition
    run = backfill_run(bank_home, "b4", 0, "valid_cards")
    assert not run.success
    (failure,) = [e for e in run.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    message = str(failure.step_failure_data.error)
    assert "stage 'valid_cards' is not ready for epoch 0" in message
    assert f"source card_payments, worker {bank.WORKERS['card_payments'] - 1}" in message
    assert bank_home.ledger.ledger().done_epochs("bank", "valid_cards") == []
