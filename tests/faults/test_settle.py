"""A stateful run killed after its ledger commit, before its state's: a read of the stage
settles the staged rows the ledger committed, so it answers the epoch the ledger says is done
(found by the fault-point campaign: the partial ``balances`` answered no row at all)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from progress.faults import FaultPoint
from tests.faults.kills import run_child
from tests.faults.scenario import new_home, run_before, send_epoch

pytestmark = [pytest.mark.faults, pytest.mark.spark, pytest.mark.timeout(1800)]

ACCOUNTS = 6


def test_a_read_after_a_kill_between_the_two_commits_sees_the_committed_epoch(
    tmp_path: Path, spark: SparkSession
) -> None:
    home = new_home(tmp_path / "home", epochs=4, rows=30, accounts=ACCOUNTS)
    rt = home.runtime(spark)
    keys = list(range(ACCOUNTS))
    send_epoch(rt, home.data, 0)
    rt.run()
    rt.lookup("balances", keys)  # every key present: epoch 1 updates them
    send_epoch(rt, home.data, 1)
    run_before(rt, "balances", [1])

    point = FaultPoint.BEFORE_PUBLISH.value
    outcome = run_child(home, "stage", "balances", "1", fault=f"{point}:1")
    assert outcome.killed_at(point), outcome.stderr[-3000:]
    assert rt.ledger.done_epochs("bank", "balances") == [0, 1]

    found = rt.lookup("balances", keys, as_of=1)
    got = sorted((r["account_id"], r["balance_cents"], r["movements"]) for r in found.rows)
    assert got == home.oracle().balances_as_of(keys, 1)
    assert found.upqueried == []  # answered from the settled state, not by an upquery
