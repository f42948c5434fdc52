"""The upquery sensor on a real Dagster instance: a read of an epoch that ``balances`` (partial)
has not processed is recorded as pending; the sensor skips naming what holds it; once the late
worker releases the epoch and the stage runs, it requests an upquery run, tagged
``epochgate/upquery``; that run fills the keys, and the next lookup is a hit equal to DuckDB SQL
over the raw inputs. The partial stage's materializations show its state."""

from __future__ import annotations

import dagster as dg
import pytest

from dagster_project.names import UPQUERY_TAG, stage_key
from dagster_project.partitions import epoch_key
from pipelines.errors import ReadPendingError
from pipelines.examples.bank_data import Oracle
from tests.dagster_project.driver import skip_text
from tests.dagster_project.scenario import Bank

pytestmark = [pytest.mark.dagster, pytest.mark.spark]

SENSOR = "bank_upqueries"


def test_a_pending_read_is_filled_by_an_upquery_run_once_its_epoch_is_processed(
    bank_home: Bank,
) -> None:
    home, drive = bank_home, bank_home.drive
    oracle = Oracle(home.data.root)
    first, *accounts = oracle.some_accounts(4)
    assert skip_text(drive.tick(SENSOR)) == (
        "No pending upquery in pipeline bank: nothing was sent to it yet."
    )

    home.send_epoch(0)
    drive.drive()
    assert skip_text(drive.tick(SENSOR)) == "No pending upquery in pipeline bank."
    home.rt.lookup("balances", [first])  # one key present from epoch 0 on
    home.send_epoch(1, hold=True)
    drive.drive()  # balances waits for epoch 1: worker 2 of card_payments holds it

    with pytest.raises(ReadPendingError, match="recorded as a pending upquery of balances"):
        home.rt.pending_reads.lookup_or_request("balances", accounts, as_of=1)
    held = skip_text(drive.tick(SENSOR))
    assert held.startswith(
        "No upquery can run in pipeline bank: 3 pending read(s) of balances as of epoch 1 "
        "wait: source card_payments, worker 2, still holds epoch 1; "
    )
    assert held.endswith("; stage movements has not run epoch 1 yet (1 message(s) waiting).")

    home.release(1)
    home.close_inputs()
    drive.drive()
    info = home.rt.state_info("balances")
    (request,) = drive.tick(SENSOR).run_requests or ()
    assert request.tags[UPQUERY_TAG] == "balances"
    assert [r.run_key for r in drive.tick(SENSOR).run_requests or ()] == [request.run_key]

    run = drive.execute(request)
    assert run.success
    metadata = next(e.step_output_data.metadata for e in run.all_events if e.is_successful_output)
    assert metadata["filled"].value == 3
    assert metadata["upqueried"].value == 3
    assert metadata["keys"].value == accounts
    assert metadata["present_keys"].value == 4
    assert skip_text(drive.tick(SENSOR)) == "No pending upquery in pipeline bank."
    (launched,) = drive.instance.get_runs(filters=dg.RunsFilter(tags={UPQUERY_TAG: "balances"}))
    assert (launched.job_name, launched.status) == ("bank_upquery", dg.DagsterRunStatus.SUCCESS)

    answer = home.rt.lookup("balances", [first, *accounts], as_of=1)
    assert answer.hits == [first, *accounts]
    assert answer.upqueried == []
    got = sorted((r["account_id"], r["balance_cents"], r["movements"]) for r in answer.rows)
    assert got == oracle.balances_as_of([first, *accounts], 1)

    # The materialization of balances at epoch 1 showed its state after that run: one key
    # present (read at epoch 0), filled by one upquery.
    records = drive.instance.fetch_materializations(
        dg.AssetRecordsFilter(
            asset_key=stage_key("bank", "balances"), asset_partitions=[epoch_key(1)]
        ),
        limit=1,
    ).records
    shown = records[0].asset_materialization
    assert shown is not None
    state = {k: shown.metadata[k].value for k in ("present_keys", "state_rows", "upqueries")}
    assert state == {"present_keys": 1, "state_rows": info.rows, "upqueries": 1}
    assert (shown.metadata["hits"].value, shown.metadata["misses"].value) == (0, 1)
    assert shown.metadata["evictions"].value == 0
    assert info.present_keys == 1
    # Its output at epoch 1 holds the present account only (when it moved then).
    rows = home.rt.read("balances", 1).collect()
    assert {r["account_id"] for r in rows} <= {first}
