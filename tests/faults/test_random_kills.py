"""Random kills during a multi-epoch run of ``bank`` with late data, corrections and backfills:
each step of the run is a child process killed at a random fault point (a random reach of it)
or after a random delay; after each kill the runs are recovered without the fault and every
invariant is checked. ``FAULTS=full`` makes at least 30 kills; the fast form a few."""

from __future__ import annotations

import os
import random
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from pipelines.run.runtime import Runtime
from progress.faults import FaultPoint
from tests.faults import invariants
from tests.faults.kills import Outcome, run_child
from tests.faults.recorder import Recorder, full
from tests.faults.scenario import (
    CAPTURED,
    Home,
    correct,
    new_home,
    release,
    release_late,
    send_epoch,
)

# A campaign is long on a loaded machine (each kill starts a JVM): past the suite's 600 s.
pytestmark = [
    pytest.mark.faults,
    pytest.mark.spark,
    pytest.mark.timeout(3600),
    pytest.mark.slow(90),
]

ACCOUNTS = 8
BACKFILL_POINTS = [
    FaultPoint.ATTEMPT_WRITTEN,
    FaultPoint.LEDGER_TRANSACTION,
    FaultPoint.BEFORE_PUBLISH,
    FaultPoint.CAPTURE_APPEND,
]
POINTS = {
    "run": [
        *BACKFILL_POINTS,
        FaultPoint.REPLAY_STEP,
        FaultPoint.TABLE_WRITTEN,
        FaultPoint.TABLE_COMMITTED,
    ],
    "backfill": BACKFILL_POINTS,
    "lookup": [FaultPoint.UPQUERY_FILL, FaultPoint.LEDGER_TRANSACTION],
    "evict": [FaultPoint.EVICTION],
}


@dataclass(frozen=True)
class Step:
    """One action of the runs side (``tests.faults.child``) and its arguments."""

    action: str
    args: tuple[str, ...] = ()


def steps(rnd: random.Random, rt: Runtime) -> list[Step]:
    """The steps after an epoch is sent: a run, then sometimes a backfill of every epoch a
    stage has done, a lookup of every account or an eviction of some, in a random order."""
    extra: list[Step] = []
    if rnd.random() < 0.5:
        stage = rnd.choice(["category_totals", "balances_full", "valid_wires"])
        done = rt.ledger.done_epochs(rt.pipeline.name, stage)
        if done:
            extra.append(Step("backfill", (stage, ",".join(str(e) for e in done))))
    if rnd.random() < 0.3:
        extra.append(Step("lookup", (",".join(str(k) for k in range(ACCOUNTS)),)))
    if rnd.random() < 0.3:
        keys = rnd.sample(range(ACCOUNTS), 3)
        extra.append(Step("evict", (",".join(str(k) for k in keys),)))
    rnd.shuffle(extra)
    return [Step("run"), *extra]


def kill(rnd: random.Random, home: Home, step: Step, durations: list[float]) -> Outcome:
    """Run ``step`` in a child killed at a random reach of a random fault point it can reach,
    or (one time in three) after a random part of how long such a child takes."""
    if rnd.random() < 1 / 3:
        typical = statistics.median(durations) if durations else 20.0
        return run_child(home, step.action, *step.args, delay=rnd.uniform(0.2, 1.0) * typical)
    point = rnd.choice(POINTS[step.action])
    count = rnd.randint(1, 2 if step.action in ("lookup", "evict") else 6)
    return run_child(home, step.action, *step.args, fault=f"{point.value}:{count}")


def recover(rt: Runtime, rebank: Runtime, step: Step) -> None:
    """The killed step again, without a fault, then every run that is due."""
    if step.action == "backfill":
        rt.backfill(step.args[0], [int(e) for e in step.args[1].split(",")])
    elif step.action == "lookup":
        rt.lookup("balances", [int(k) for k in step.args[0].split(",")])
    elif step.action == "evict":
        rt.evict("balances", [int(k) for k in step.args[0].split(",")])
    rt.run()
    rebank.run()


def test_random_kills_of_a_bank_run_lose_nothing_and_count_nothing_twice(
    tmp_path: Path, spark: SparkSession, recorder: Recorder
) -> None:
    wanted = 30 if full() else 2
    seed = int(os.environ.get("FAULTS_SEED", "15"))
    rnd = random.Random(seed)
    campaign = recorder.campaign("random kills")
    epochs = 12 if full() else 4
    home = new_home(tmp_path / "home", epochs=epochs, rows=40, accounts=ACCOUNTS)
    data = home.data
    rt = home.runtime(spark)
    send_epoch(rt, data, 0)
    rt.run()
    rt.capture(CAPTURED, home.capture, from_epoch=0)
    rebank = home.rebank(spark)
    rebank.run()
    durations: list[float] = []
    epoch = 0
    while campaign.kills < wanted:
        epoch += 1
        if epoch < epochs:
            send_epoch(rt, data, epoch)
        if epoch == data.late_epoch + 1:
            release_late(rt, data, epoch)  # the late file comes one epoch late
        if epoch >= epochs:  # out of epochs: corrections and backfills of done ones go on
            release(rt, data)
            correct(rt, data, rnd.randrange(epochs), tmp_path / "corrections")
        elif epoch > 1 and rnd.random() < 0.4:
            correct(rt, data, rnd.randrange(epoch), tmp_path / "corrections")
        for step in steps(rnd, rt):
            before = invariants.snapshot(rt, rebank)
            outcome = kill(rnd, home, step, durations)
            assert not outcome.group_left, "the child's JVM outlived it"
            if not outcome.killed:
                assert outcome.returncode == 0, outcome.stderr[-3000:]
                durations.append(outcome.seconds)
                campaign.survived += 1
                continue
            where = outcome.stderr.rsplit("killed at ", 1)[-1].split(" ")[0]
            campaign.killed(where if "epochgate fault" in outcome.stderr else "random delay")
            after_kill = invariants.check_after_kill(rt, rebank, before)
            assert after_kill.problems == [], step
            clock = time.monotonic()
            recover(rt, rebank, step)
            campaign.recovered(time.monotonic() - clock)
            done = min(epoch + 1, epochs) if epoch > data.late_epoch else min(epoch + 1, 2)
            tally = invariants.check_all(rt, rebank, home, done, before)
            tally.add(after_kill)
            campaign.checked(tally)
            assert tally.problems == [], (step, outcome.stderr[-500:])
            assert (tally.lost, tally.doubled) == (0, 0)
