"""The frontier sensor drives the bank example through two epochs on a real Dagster instance.

A timeline: send an epoch, tick, see what would run, run it in process, tick again. Late data
holds an epoch and the sensor says who holds it; releasing it lets the epoch finish; the outputs
then equal the DuckDB-SQL oracle over the raw inputs, and every materialization carries the
ledger's account of it.
"""

from __future__ import annotations

import dagster as dg
import pytest

from dagster_project.names import LEDGER_CHECK, stage_key
from dagster_project.partitions import epoch_key
from pipelines.examples import bank
from pipelines.examples.bank_data import Oracle
from pipelines.examples.demo import verify_outputs
from tests.dagster_project.driver import requested, skip_text
from tests.dagster_project.scenario import Bank

pytestmark = [pytest.mark.dagster, pytest.mark.spark]

STAGES = [name for name, stage in bank.pipeline().stages.items() if not stage.is_source]


def test_the_sensor_runs_each_epoch_when_ready_and_names_what_holds_it(bank_home: Bank) -> None:
    home, drive = bank_home, bank_home.drive

    # Nothing sent yet: there is no ledger, and nothing to run.
    assert skip_text(drive.tick()).startswith("No ledger at ")

    # Epoch 0 arrives in full: the stages that read sources are ready, and one run does every
    # stage downstream of them too, upstream first.
    home.send_epoch(0)
    first = drive.tick()
    assert requested(first) == [(0, set(STAGES))]
    (request,) = first.run_requests or ()
    order = request.tags["epochgate/stages"].split(",")
    assert set(order[:3]) == {"valid_cards", "valid_wires", "rings"}  # they read sources only
    assert order.index("movements") < order.index("enriched") < order.index("region_totals")
    added = [list(r.partition_keys) for r in first.dynamic_partitions_requests or ()]
    assert added == [[epoch_key(0)]]
    again = drive.tick()
    assert [r.run_key for r in again.run_requests or ()] == [
        r.run_key for r in first.run_requests or ()
    ]
    assert not again.dynamic_partitions_requests  # the partition exists now

    run = drive.execute(request)
    checks = run.get_asset_check_evaluations()
    assert {c.asset_key for c in checks} == {stage_key("bank", s) for s in STAGES}
    assert all(c.passed for c in checks)  # the ledger's, and the expectations'
    named = {(c.asset_key.path[1], c.check_name) for c in checks}
    assert named >= {("enriched", "region_known"), ("valid_cards", "debit")}
    assert {n for _, n in named} == {LEDGER_CHECK, "region_known", "debit"}
    idle = skip_text_of(drive.drive())
    assert idle.startswith(
        "Nothing to run in pipeline bank. "
        "Nothing waits: every message sent so far has been processed. "
        "Source accounts, worker 0, still holds epoch 1; "
    )
    assert "; source card_payments, workers 0, 1, 2, still hold epoch 1" in idle

    # Epoch 1: one card worker holds it open (its late file is still to come).
    home.send_epoch(1, hold=True)
    assert requested(drive.tick()) == [(1, {"valid_wires", "rings"})]
    held = skip_text_of(drive.drive())
    assert "Epoch 1 waits: source card_payments, worker 2, still holds epoch 1; " in held
    status = {s.stage: s for s in home.ledger.ledger().status("bank")}
    assert status["valid_wires"].done == (0, 1)
    assert status["valid_cards"].done == (0,)

    # The late file arrives and every input closes: epoch 1 finishes.
    home.release(1)
    home.close_inputs()
    assert skip_text_of(drive.drive()).endswith("Every input is closed.")

    assert verify_outputs(home.rt, Oracle(home.data.root), 2) == []
    ledger = home.ledger.ledger()
    assert ledger.verify().ok
    for stage in STAGES:
        for epoch in (0, 1):
            messages = ledger.message("bank", stage, 0, epoch)
            metadata = latest_materialization(drive.instance, stage, epoch).metadata
            assert metadata["status"].value == "succeeded"
            assert metadata["rows"].value == sum(m.rows for m in messages)
            assert metadata["ledger_batch"].value == messages[0].batch_id
            # A union of inputs with the same columns catalogs their files as parts of its attempt.
            assert {m.attempt.split(".")[0] for m in messages} == {metadata["attempt"].value}
            reads = metadata["reads"].value
            spec = bank.pipeline().stage(stage)
            inputs = spec.inputs
            # A stage that holds state reads its own output of the epoch before too (its carry).
            carried = {stage} if spec.holds_state and epoch > 0 else set()
            assert isinstance(reads, list)
            assert {r["stage"] for r in reads} == set(inputs) | carried
            assert all(r["epoch"] == epoch - (r["stage"] == stage) for r in reads)
            frontier = metadata["input_frontier"].value
            assert frontier == [
                {"port": i, "from": u, "frontier": [epoch]} for i, u in enumerate(inputs)
            ]
    rounds = latest_materialization(drive.instance, "rings", 1).metadata["rounds"].value
    assert isinstance(rounds, int)
    assert rounds >= 1


def skip_text_of(reason: dg.SkipReason) -> str:
    return reason.skip_message or ""


def latest_materialization(
    instance: dg.DagsterInstance, stage: str, epoch: int
) -> dg.AssetMaterialization:
    key = stage_key("bank", stage)
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=key, asset_partitions=[epoch_key(epoch)]), limit=1
    ).records
    assert records, f"no materialization of {stage} at epoch {epoch}"
    materialization = records[0].asset_materialization
    assert materialization is not None
    return materialization
