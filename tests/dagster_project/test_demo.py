"""``python -m dagster_project.dev.demo``: the bank example through Dagster, on a persistent
instance that ``make ui`` then shows; and what it does when something else uses that instance."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import dagster as dg
import pytest
from dagster._daemon.types import DaemonHeartbeat
from pyspark.sql import SparkSession

from dagster_project.definitions import build_definitions
from dagster_project.dev.demo import (
    DemoError,
    check_no_daemon,
    drop_epoch_partitions,
    fail_left_over_runs,
    main,
    run_demo,
)
from dagster_project.dev.driver import SENSOR_NAME_TAG
from dagster_project.names import PARTITION_TAG, UPQUERY_TAG, job_name, stage_key
from dagster_project.partitions import epoch_key
from dagster_project.resources import LedgerResource
from pipelines.examples import bank
from progress.ledger import Ledger

pytestmark = pytest.mark.dagster

STAGES = [name for name, stage in bank.pipeline().stages.items() if not stage.is_source]


@pytest.mark.spark
def test_the_demo_drives_bank_through_dagster_and_verifies_it(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    spark: SparkSession,
) -> None:
    state = tmp_path / "state"
    monkeypatch.setenv("EPOCHGATE_HOME", str(state))
    monkeypatch.setenv("EPOCHGATE_SPARK", "local[2]")  # the session the tests share
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "elsewhere"))  # the demo uses its own
    code = main(["--epochs", "3", "--rows", "120", "--accounts", "12", "--seed", "3"])
    out = capsys.readouterr().out
    assert code == 0, out

    # Worker 2 of card_payments holds epoch 2, and the sensor says so.
    held = out.split("the sensor, while worker 2 of card_payments holds epoch 2:\n")[1]
    assert held.startswith(
        "  Nothing to run in pipeline bank. "
        "Epoch 2 waits: source card_payments, worker 2, still holds epoch 2; "
    )
    assert "status:\npipeline bank\n" in held

    # Reads of the partial balances: an upquery, a hit, an eviction and a re-read; then a read
    # of the held epoch, recorded as pending, and filled by the upquery sensor's run.
    reads = out.split("reads of balances (partial: it keeps only the accounts that are read):\n")
    lines = reads[1].splitlines()
    assert re.fullmatch(
        r"  lookup \[\d+, \d+\] as of epoch 1, 2 by an upquery in \d+ ms: account .*", lines[0]
    ), lines[0]
    assert re.fullmatch(r"  lookup \[\d+, \d+\] again as of epoch 1, 2 hit\(s\) in .*", lines[1])
    assert re.fullmatch(r"  evict \[(\d+)\]: \[\1\] turned into holes", lines[2]), lines[2]
    assert re.fullmatch(r"  lookup \[\d+\] as of epoch 1, 1 by an upquery in .*", lines[3])
    assert re.fullmatch(
        r"  lookup \[\d+\] as of epoch 2: stage 'balances' is not ready for epoch 2: source "
        r"card_payments, worker 2, still holds epoch 2; .*; the read is recorded as a pending "
        r"upquery of balances: it is filled once balances has processed epoch 2",
        lines[4],
    ), lines[4]
    assert lines[5].startswith(
        "  the upquery sensor: No upquery can run in pipeline bank: 1 pending read(s) of "
        "balances as of epoch 2 wait: source card_payments, worker 2, still holds epoch 2; "
    )
    answered = out.split("the upquery sensor, now that balances has processed epoch 2:\n")[1]
    filled = answered.splitlines()
    assert re.fullmatch(r"  run \w{8} upquery of balances: succeeded in .*", filled[0])
    assert filled[1] == "  then: No pending upquery in pipeline bank."
    assert re.fullmatch(r"  lookup \[\d+\] as of epoch 2, 1 hit\(s\) in .*", filled[2])
    table = out.split("epochgate state:\n")[1].splitlines()
    columns = re.split(r"\s{2,}", table[0])
    shown = dict(zip(columns, re.split(r"\s{2,}", table[1]), strict=True))
    # 3 accounts present; hits 2 + 1; misses 2 + 1 + 1 (the pending read); 3 upqueries (the
    # first read's, the re-read's, the upquery run's); 1 eviction.
    assert shown == shown | {
        "stage": "balances",
        "state": "partial",
        "present keys": "3",
        "hits": "3",
        "misses": "4",
        "upqueries": "3",
        "evictions": "1",
    }

    # Epoch 0's accounts file misses regions: enriched fails its expectation, the sensor holds
    # the epoch naming it (and does not run it again), the correction lets it run.
    bad = out.split("epoch 0: sending (an accounts file with regions missing)")[1]
    assert re.search(
        r"run \w{8} epoch 0 \(.*enriched.*\): FAILED after .*: stage enriched epoch 0 failed "
        r"expectation region_known: \d+ of \d+ rows",
        bad,
    ), bad
    assert "Epoch 0 waits: stage enriched epoch 0 failed expectation region_known: " in bad
    assert "correcting accounts at epoch 0 with the right file" in bad
    assert re.search(r"run \w{8} epoch 0 \(enriched, region_totals\): succeeded", bad), bad
    assert "enriched.region_known (fail): 0 of " in out
    assert "valid_cards.debit (drop): " in out

    summary = re.search(r"(\d+) Dagster runs launched, (\d+) succeeded \(1 failed as meant\)", out)
    assert summary is not None, out
    launched = int(summary[1])
    # A run per epoch (epoch 0's failed), one more for the held epoch (its wires ran while its
    # cards waited), the upquery run, and epoch 0's run after the correction.
    assert launched == int(summary[2]) + 1 == 3 + 1 + 1 + 1
    assert "8 stages x 3 epochs verified" in out
    assert "\nledger: ok (" in out

    # The runs, partitions and materializations are in the instance `make ui` opens.
    home = (state / "dagster").resolve()
    assert os.environ["DAGSTER_HOME"] == str(home)
    assert f"Dagster instance: {home} " in out
    assert (home / "dagster.yaml").exists()
    with dg.DagsterInstance.from_config(str(home)) as instance:
        runs = instance.get_runs()
        assert len(runs) == launched
        (failed,) = [r for r in runs if r.status == dg.DagsterRunStatus.FAILURE]
        assert failed.tags[PARTITION_TAG] == epoch_key(0)
        runs = [r for r in runs if r is not failed]
        assert {r.status for r in runs} == {dg.DagsterRunStatus.SUCCESS}
        (upquery,) = [r for r in runs if r.job_name == "bank_upquery"]
        assert upquery.tags[SENSOR_NAME_TAG] == "bank_upqueries"
        assert upquery.tags[UPQUERY_TAG] == "balances"
        runs = [r for r in runs if r is not upquery]
        assert {r.tags[SENSOR_NAME_TAG] for r in runs} == {"bank_frontier"}
        assert {r.tags[PARTITION_TAG] for r in runs} == {epoch_key(e) for e in range(3)}
        assert instance.get_dynamic_partitions("bank_epochs") == [epoch_key(e) for e in range(3)]
        for stage in STAGES:
            found = instance.get_materialized_partitions(stage_key("bank", stage))
            assert found == {epoch_key(e) for e in range(3)}, stage
        # The expectations are asset checks per partition: region_known failed at epoch 0,
        # then passed there after the correction; it passed at every other epoch. The drop of
        # card payments that are no debit passes each epoch (what was committed meets it).
        key = dg.AssetCheckKey(stage_key("bank", "enriched"), "region_known")
        history = instance.event_log_storage.get_asset_check_execution_history(key, limit=20)
        by_epoch: dict[str | None, list[str]] = {}
        for record in reversed(history):  # oldest first
            by_epoch.setdefault(record.partition, []).append(record.status.value)
        assert by_epoch == {
            epoch_key(0): ["FAILED", "SUCCEEDED"],
            epoch_key(1): ["SUCCEEDED"],
            epoch_key(2): ["SUCCEEDED"],
        }
        # Each materialization says whether its epoch is final, since when, and the latency
        # from its input's completion.
        records = instance.fetch_materializations(
            dg.AssetRecordsFilter(
                asset_key=stage_key("bank", "enriched"), asset_partitions=[epoch_key(1)]
            ),
            limit=1,
        ).records
        shown = records[0].asset_materialization.metadata  # type: ignore[union-attr]
        assert shown["final"].value is True
        assert shown["latency_seconds"].value >= 0
        assert shown["final_at"].value >= shown["input_complete_at"].value
        debit = dg.AssetCheckKey(stage_key("bank", "valid_cards"), "debit")
        drops = instance.event_log_storage.get_asset_check_execution_history(debit, limit=20)
        assert {r.partition for r in drops} == {epoch_key(e) for e in range(3)}
        assert {r.status.value for r in drops} == {"SUCCEEDED"}
    ledger = Ledger(state / "demo" / "ledger.duckdb")
    assert all(s.done == (0, 1, 2) for s in ledger.status("bank") if not s.is_input)


def test_the_demo_refuses_an_instance_a_daemon_uses(tmp_path: Path) -> None:
    with dg.instance_for_test() as instance:
        now = time.time()
        instance.add_daemon_heartbeat(DaemonHeartbeat(now - 5, "SENSOR", None, None))
        with pytest.raises(
            DemoError, match=r"a Dagster daemon uses the instance .* stop `make ui`"
        ):
            run_demo(tmp_path / "demo", instance, echo=lambda _: None)
        assert not (tmp_path / "demo").exists()
        check_no_daemon(instance, now=now + 120)  # a daemon silent for two minutes is gone


def test_runs_an_interrupted_demo_left_in_flight_are_marked_failed(tmp_path: Path) -> None:
    ledger = LedgerResource(path=str(tmp_path / "ledger.duckdb"))
    job = build_definitions([bank.pipeline()], ledger=ledger).resolve_job_def(job_name("bank"))
    with dg.instance_for_test() as instance:
        left = instance.create_run_for_job(job, status=dg.DagsterRunStatus.STARTED)
        done = instance.create_run_for_job(job, status=dg.DagsterRunStatus.SUCCESS)
        assert fail_left_over_runs(instance) == [left.run_id]
        statuses = {r.run_id: r.status for r in instance.get_runs()}
        assert statuses == {
            left.run_id: dg.DagsterRunStatus.FAILURE,
            done.run_id: dg.DagsterRunStatus.SUCCESS,
        }
        assert fail_left_over_runs(instance) == []


def test_the_epochs_of_an_earlier_demo_are_forgotten() -> None:
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("bank_epochs", [epoch_key(e) for e in range(4)])
        instance.add_dynamic_partitions("shop_epochs", [epoch_key(0)])
        drop_epoch_partitions(instance)
        assert instance.get_dynamic_partitions("bank_epochs") == []
        assert instance.get_dynamic_partitions("shop_epochs") == [epoch_key(0)]
