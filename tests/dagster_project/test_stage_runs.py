"""Runs of stages under Dagster: refused when not ready, not requested twice while in flight,
and re-run by the sensor when a revision made them stale."""

from __future__ import annotations

import dagster as dg
import pytest

from dagster_project.names import PARTITION_TAG, check_key, job_name, stage_key
from dagster_project.partitions import epoch_key
from pipelines.examples import bank
from pipelines.examples.bank_data import Oracle
from pipelines.examples.demo import verify_outputs
from tests.dagster_project.driver import requested, skip_text
from tests.dagster_project.scenario import Bank

pytestmark = [pytest.mark.dagster, pytest.mark.spark]


def send_cards(home: Bank, epoch: int) -> None:
    """Only the card workers send ``epoch``: the wire and account workers still hold it."""
    for w in range(bank.WORKERS["card_payments"]):
        for path in home.data.files("card_payments", epoch, w):
            home.rt.input("card_payments", w).send(path)
        home.rt.input("card_payments", w).advance_to(epoch + 1)


def test_a_stage_that_is_not_ready_fails_the_run_naming_who_holds_it(bank_home: Bank) -> None:
    send_cards(bank_home, 0)
    bank_home.drive.tick()  # adds the partition
    run = bank_home.drive.execute(
        dg.RunRequest(
            partition_key=epoch_key(0),
            asset_selection=[stage_key("bank", "valid_cards"), stage_key("bank", "movements")],
        ),
        raise_on_error=False,
    )
    assert not run.success
    (failure,) = [e for e in run.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    message = str(failure.step_failure_data.error)
    assert "stage 'movements' is not ready for epoch 0" in message
    assert "source wire_transfers, worker 0, still holds epoch 0" in message
    # The ready stage before it committed, and reported it.
    (done,) = run.get_asset_materialization_events()
    assert done.asset_key == stage_key("bank", "valid_cards")
    assert bank_home.ledger.ledger().done_epochs("bank", "valid_cards") == [0]

    # The ledger checks, run on their own, say which stage has run the epoch.
    job = bank_home.defs.resolve_job_def(job_name("bank"))
    checks = job.get_subset(
        asset_check_selection={check_key("bank", "valid_cards"), check_key("bank", "movements")}
    ).execute_in_process(instance=bank_home.drive.instance, partition_key=epoch_key(0))
    found = {e.asset_key.path[1]: e for e in checks.get_asset_check_evaluations()}
    assert found["valid_cards"].passed
    assert not found["movements"].passed
    assert found["movements"].description == "movements has not run epoch 0"


def test_stages_of_a_run_in_flight_are_not_requested_again(bank_home: Bank) -> None:
    home, drive = bank_home, bank_home.drive
    send_cards(home, 0)
    assert requested(drive.tick()) == [(0, {"valid_cards"})]
    job = home.defs.resolve_job_def(job_name("bank"))
    running = drive.instance.create_run_for_job(
        job.get_subset(asset_selection={stage_key("bank", "valid_cards")}),
        status=dg.DagsterRunStatus.STARTED,
        tags={PARTITION_TAG: epoch_key(0)},
        asset_selection={stage_key("bank", "valid_cards")},
    )
    text = skip_text(drive.tick())
    assert text.startswith("Nothing to run in pipeline bank. Epoch 0 is running (valid_cards). ")
    assert "source wire_transfers, workers 0, 1, still hold epoch 0" in text
    assert "card_payments" not in text  # its workers have moved on to epoch 1
    drive.instance.report_run_canceled(running)
    assert requested(drive.tick()) == [(0, {"valid_cards"})]


def test_the_sensor_reruns_what_a_revision_made_stale(bank_home: Bank) -> None:
    home, drive = bank_home, bank_home.drive
    home.send_epoch(0)
    home.rt.run()  # epoch 0 done without Dagster (the CLI's way)
    first = drive.tick()
    assert skip_text(first).startswith("Nothing to run in pipeline bank. Nothing waits: ")
    assert [list(r.partition_keys) for r in first.dynamic_partitions_requests or ()] == [
        [epoch_key(0)]
    ]

    revised = home.rt.revise("valid_cards", [0])  # a backfill of one stage
    assert [r.status for r in revised] == ["revised"]
    stale = drive.tick()
    # movements reads it, and the same run revises what reads movements after it (but not
    # balances: a stateful stage is revised on its own, from its earliest stale epoch on).
    assert requested(stale) == [(0, {"movements", "category_totals", "enriched", "region_totals"})]
    run = drive.execute(*(stale.run_requests or ()))
    events = run.get_asset_materialization_events()
    assert {e.materialization.metadata["status"].value for e in events} == {"revised"}
    assert requested(drive.tick()) == [(0, {"balances"})]
    drive.drive()
    assert home.ledger.ledger().stale("bank") == []
    assert verify_outputs(home.rt, Oracle(home.data.root), 1) == []
