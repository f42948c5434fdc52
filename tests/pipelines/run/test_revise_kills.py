"""A revision of a stateful stage killed half way: the rest of it is stale, and what recovers it
neither counts an epoch twice nor reads a stale input (found by the random-kill campaign: a
backfill of ``valid_wires`` killed while it revised ``balances``, recovered by the same backfill,
raised "stage 'balances' epoch 1 is still stale after it was revised")."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from progress.faults import FaultPoint
from progress.ledger import release_all
from tests.faults import invariants
from tests.faults.kills import run_child
from tests.faults.scenario import Home, new_home, release_late, send_epoch

pytestmark = [pytest.mark.spark, pytest.mark.timeout(1200), pytest.mark.slow(130)]

ACCOUNTS = 6
DONE = 4
"""Epochs run before the kill."""


@pytest.fixture(scope="module")
def done(tmp_path_factory: pytest.TempPathFactory, spark: SparkSession) -> tuple[Path, Path]:
    """Where ``done_home`` was made once for the module, and a copy of it as it was then."""
    root = tmp_path_factory.mktemp("revise_kills")
    done_home(root / "home", spark)
    release_all()  # the ledger and state files it keeps attached, let go before the copy
    shutil.copytree(root / "home", root / "made", symlinks=True)
    return root / "home", root / "made"


@pytest.fixture
def home(done: tuple[Path, Path]) -> Home:
    """``done_home`` as it was made, at the path it was made at (the ledger names its files by
    their paths), whatever the test before did to it."""
    where, made = done
    release_all()  # what the test before kept attached, let go before its files are removed
    shutil.rmtree(where)
    shutil.copytree(made, where, symlinks=True)
    return Home(where)


def done_home(root: Path, spark: SparkSession) -> Home:
    """Epochs 0..3 of the campaigns' ``bank`` run, every account present in ``balances``."""
    home = new_home(root, epochs=DONE + 1, rows=30, accounts=ACCOUNTS)
    rt = home.runtime(spark)
    send_epoch(rt, home.data, 0)
    rt.run()
    rt.lookup("balances", list(range(ACCOUNTS)))  # present keys: balances' output has rows
    for epoch in range(1, DONE):
        send_epoch(rt, home.data, epoch)
    release_late(rt, home.data, DONE - 1)
    rt.run()
    assert rt.ledger.done_epochs("bank", "balances") == list(range(DONE))
    return home


def test_a_backfill_above_a_stateful_stage_revises_each_of_its_epochs_once(
    home: Home, spark: SparkSession
) -> None:
    rt = home.runtime(spark)
    results = rt.backfill("valid_wires", list(range(DONE)))
    revised = Counter(r.stage for r in results)
    assert revised["balances"] == DONE  # from epoch 0 once, after every movements epoch
    assert revised["movements"] == DONE
    assert rt.stale() == []
    tally = invariants.check_all(rt, None, home, DONE, {})
    assert tally.problems == []


def test_a_backfill_killed_between_the_two_commits_of_a_stateful_revision_recovers(
    home: Home, spark: SparkSession
) -> None:
    rt = home.runtime(spark)
    point = FaultPoint.BEFORE_PUBLISH.value
    # Its second commit: balances epoch 1 is in the ledger, its state rows are staged only.
    outcome = run_child(home, "backfill", "balances", "0", fault=f"{point}:2")
    assert outcome.killed_at(point), outcome.stderr[-3000:]
    with rt.state.connect(reading=True) as con:
        staged = con.execute(
            "SELECT stage, epoch FROM attempts WHERE pipeline = 'bank' AND NOT committed"
        ).fetchall()
    assert staged == [("balances", 1)]
    # Epoch 2 carried on from the epoch 1 that the revision replaced: it is stale.
    assert rt.stale() == [("balances", 2)]
    after_kill = invariants.check_after_kill(rt, None, {})
    assert after_kill.problems == []

    results = rt.backfill("valid_wires", list(range(DONE)))  # rewinds balances to before 0
    assert Counter(r.stage for r in results)["balances"] == DONE
    assert rt.stale() == []
    tally = invariants.check_all(rt, None, home, DONE, {})
    assert tally.problems == []
    assert (tally.lost, tally.doubled) == (0, 0)


def test_a_stateful_revision_killed_before_its_first_commit_leaves_the_state_whole(
    home: Home, spark: SparkSession
) -> None:
    """Killed in its first epoch's work, after it rewound the state to epoch 0: nothing was
    committed, nothing is stale, and the next epoch's run carries on from the state of the
    last epoch, not the rewound one; a read meanwhile sees the committed epochs."""
    rt = home.runtime(spark)
    before = rt.lookup("balances_full", list(range(ACCOUNTS)))
    point = FaultPoint.ATTEMPT_WRITTEN.value
    outcome = run_child(home, "backfill", "balances_full", "1", fault=f"{point}:1")
    assert outcome.killed_at(point), outcome.stderr[-3000:]
    assert rt.stale() == []
    assert rt.lookup("balances_full", list(range(ACCOUNTS))).rows == before.rows
    send_epoch(rt, home.data, DONE)
    rt.run()
    tally = invariants.check_all(rt, None, home, DONE + 1, {})
    assert tally.problems == []
    assert (tally.lost, tally.doubled) == (0, 0)


def test_a_stateful_revision_killed_before_an_epoch_is_finished_by_the_next_run(
    home: Home, spark: SparkSession
) -> None:
    rt = home.runtime(spark)
    point = FaultPoint.ATTEMPT_WRITTEN.value
    # Epoch 1 is revised, epoch 2's attempt is written but not committed: the state is epoch 1's.
    outcome = run_child(home, "backfill", "balances_full", "1", fault=f"{point}:2")
    assert outcome.killed_at(point), outcome.stderr[-3000:]
    assert rt.stale() == [("balances_full", 2)]

    results = rt.run()
    assert sorted((r.stage, r.epoch) for r in results) == [("balances_full", e) for e in (2, 3)]
    send_epoch(rt, home.data, DONE)  # an epoch after it carries on from the state
    rt.run()
    tally = invariants.check_all(rt, None, home, DONE + 1, {})
    assert tally.problems == []
    assert (tally.lost, tally.doubled) == (0, 0)
