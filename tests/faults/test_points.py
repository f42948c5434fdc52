"""A kill at each fault point, one epoch of ``bank`` each: the child dies by SIGKILL there (its
JVM with it), nothing it did not commit is visible, and once the runs are recovered without the
fault, every invariant holds (``tests.faults.invariants``). One home for every point, so the
runs each point needs behind it are made once."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from pipelines.run.runtime import Runtime
from progress.faults import FaultPoint
from tests.faults import invariants
from tests.faults.child import dagster_run
from tests.faults.kills import run_child
from tests.faults.recorder import Recorder
from tests.faults.scenario import (
    CAPTURED,
    Home,
    new_home,
    release,
    release_late,
    run_before,
    send_epoch,
)

# A campaign is long on a loaded machine (each kill starts a JVM): past the suite's 600 s.
pytestmark = [
    pytest.mark.faults,
    pytest.mark.spark,
    pytest.mark.timeout(3600),
    pytest.mark.slow(150),
]

ACCOUNTS = 10
KEYS = ",".join(str(k) for k in range(ACCOUNTS))


def _nothing(rt: Runtime, epoch: int) -> None:
    pass


def _run(rt: Runtime, epoch: int) -> None:
    rt.run()


def _holes(rt: Runtime, epoch: int) -> None:
    rt.run()
    rt.evict("balances", list(range(ACCOUNTS)))


def _filled(rt: Runtime, epoch: int) -> None:
    rt.run()
    rt.lookup("balances", list(range(ACCOUNTS)))


def _before(stage: str) -> Callable[[Runtime, int], None]:
    """Run what ``stage`` reads at every epoch through this one, and ``stage`` itself before it
    (those a late file held back included; the done ones are done already)."""

    def prepare(rt: Runtime, epoch: int) -> None:
        run_before(rt, stage, range(epoch + 1))
        for earlier in range(epoch):  # it runs its epochs in order
            rt.run_stage(stage, earlier)

    return prepare


@dataclass(frozen=True)
class Case:
    """Where to kill: the point, on which reach, the child's action (``{e}``: the epoch), and
    what the test's process runs first (what the action needs behind it)."""

    point: FaultPoint
    count: int
    action: tuple[str, ...]
    prepare: Callable[[Runtime, int], None] = _nothing

    def fault(self) -> str:
        return f"{self.point.value}:{self.count}"

    def args(self, epoch: int) -> tuple[str, ...]:
        return tuple(a.format(e=epoch) for a in self.action)


CASES = [
    Case(FaultPoint.ATTEMPT_WRITTEN, 1, ("stage", "valid_cards", "{e}")),
    Case(FaultPoint.LEDGER_TRANSACTION, 2, ("stage", "valid_wires", "{e}")),
    Case(FaultPoint.BEFORE_PUBLISH, 1, ("stage", "export", "{e}"), _before("export")),
    Case(FaultPoint.TABLE_COMMITTED, 1, ("stage", "lake", "{e}"), _before("lake")),
    Case(FaultPoint.TABLE_WRITTEN, 1, ("stage", "ice", "{e}"), _before("ice")),
    Case(FaultPoint.BEFORE_PUBLISH, 1, ("stage", "balances", "{e}"), _before("balances")),
    Case(FaultPoint.CAPTURE_APPEND, 1, ("stage", "movements", "{e}"), _before("movements")),
    Case(FaultPoint.UPQUERY_FILL, 1, ("lookup", KEYS), _holes),
    Case(FaultPoint.REPLAY_STEP, 1, ("replay",), _run),
    Case(FaultPoint.EVICTION, 1, ("evict", KEYS), _filled),
    Case(FaultPoint.BEFORE_MATERIALIZATION, 2, ("dagster", "{e}")),
]
RELEASE_AT = 3
"""The epoch at which the worker holding the late epoch (2) sends its late file."""


def materialized(home: Home, rt: Runtime, epoch: int) -> None:
    """Dagster has recorded a materialization of every stage the ledger has done at ``epoch``
    (a run of the partition again records the one its killed run committed but never
    reported)."""
    import dagster as dg

    from dagster_project.names import stage_key
    from dagster_project.partitions import epoch_key

    instance = dg.DagsterInstance.local_temp(str(home.root / "dagster"))
    for stage, spec in rt.pipeline.stages.items():
        if not spec.is_source and epoch in rt.ledger.done_epochs(rt.pipeline.name, stage):
            shown = instance.get_materialized_partitions(stage_key(rt.pipeline.name, stage))
            assert epoch_key(epoch) in shown, stage


def recover(home: Home, rt: Runtime, rebank: Runtime, action: tuple[str, ...]) -> None:
    """The killed action again, without the fault, then every run that is due."""
    name, args = action[0], action[1:]
    if name == "dagster":
        dagster_run(home, int(args[0]))
        materialized(home, rt, int(args[0]))
    elif name == "stage":
        rt.run_stage(args[0], int(args[1]))
    elif name == "lookup":
        rt.lookup("balances", [int(k) for k in args[0].split(",")])
    elif name == "evict":
        rt.evict("balances", [int(k) for k in args[0].split(",")])
        assert rt.state_info("balances").present_keys == 0
    rt.run()
    rebank.run()


def test_a_kill_at_each_fault_point_is_recovered_with_every_invariant(
    tmp_path: Path, spark: SparkSession, recorder: Recorder
) -> None:
    campaign = recorder.campaign("fault points")
    home = new_home(tmp_path / "home", epochs=len(CASES) + 1, rows=40, accounts=ACCOUNTS)
    data = home.data
    rt = home.runtime(spark)
    send_epoch(rt, data, 0)
    rt.run()
    rt.capture(CAPTURED, home.capture, from_epoch=0)
    rebank = home.rebank(spark)
    rebank.run()
    for epoch, case in enumerate(CASES, start=1):
        send_epoch(rt, data, epoch)
        if epoch == RELEASE_AT:
            release_late(rt, data, epoch)
        case.prepare(rt, epoch)
        before = invariants.snapshot(rt, rebank)

        outcome = run_child(home, *case.args(epoch), fault=case.fault())
        assert outcome.killed_at(case.point.value), (case, outcome.stderr[-3000:])
        assert not outcome.group_left, "the child's JVM outlived it"
        campaign.killed(case.point.value)
        after_kill = invariants.check_after_kill(rt, rebank, before)
        assert after_kill.problems == [], case

        clock = time.monotonic()
        recover(home, rt, rebank, case.args(epoch))
        campaign.recovered(time.monotonic() - clock)

        done = epoch + 1 if epoch >= RELEASE_AT else min(epoch + 1, data.late_epoch)
        tally = invariants.check_all(rt, rebank, home, done, before)
        tally.add(after_kill)
        campaign.checked(tally)
        assert tally.problems == [], case
        assert (tally.lost, tally.doubled) == (0, 0)
    release(rt, data)
    rt.run()
    rebank.run()
    assert invariants.check_all(rt, rebank, home, data.epochs, {}).problems == []
