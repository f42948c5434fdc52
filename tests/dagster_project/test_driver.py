"""The driver records each run it executes, tags it as the daemon tags a sensor's runs, and
names a failed run and its error."""

from __future__ import annotations

import dagster as dg
import pytest

from dagster_project.dev.driver import RUN_KEY_TAG, SENSOR_NAME_TAG, DriveError
from dagster_project.names import stage_key
from dagster_project.partitions import epoch_key
from pipelines.examples import bank
from tests.dagster_project.scenario import Bank

pytestmark = [pytest.mark.dagster, pytest.mark.spark]


def test_a_failed_run_is_recorded_and_named(bank_home: Bank) -> None:
    home, drive = bank_home, bank_home.drive
    for w in range(bank.WORKERS["card_payments"]):  # the wire workers still hold epoch 0
        for path in home.data.files("card_payments", 0, w):
            home.rt.input("card_payments", w).send(path)
        home.rt.input("card_payments", w).advance_to(1)
    drive.tick()  # adds the partition
    request = dg.RunRequest(
        run_key="cards-then-movements",
        partition_key=epoch_key(0),
        asset_selection=[stage_key("bank", "valid_cards"), stage_key("bank", "movements")],
    )
    with pytest.raises(DriveError) as raised:
        drive.execute(request)

    (run,) = drive.runs
    assert not run.success
    assert (run.run_key, run.epoch, run.stages) == (
        "cards-then-movements",
        0,
        ("valid_cards", "movements"),
    )
    assert run.error is not None
    assert run.error == (
        "stage 'movements' is not ready for epoch 0: "
        "source wire_transfers, worker 0, still holds epoch 0; "
        "source wire_transfers, worker 1, still holds epoch 0"
    )
    assert str(raised.value) == run.describe()
    assert f"epoch 0 (valid_cards, movements): FAILED after {run.seconds:.1f}s: " in str(
        raised.value
    )
    assert drive.launched == ["cards-then-movements"]
    recorded = drive.instance.get_run_by_id(run.run_id)
    assert recorded is not None
    assert recorded.status == dg.DagsterRunStatus.FAILURE
    assert recorded.tags[RUN_KEY_TAG] == "cards-then-movements"
    assert recorded.tags[SENSOR_NAME_TAG] == "bank_frontier"
