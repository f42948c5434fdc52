"""Fault points: the setting's grammar, and a process that reaches its armed point dies there."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from progress.errors import EpochgateError, FaultSpecError
from progress.faults import FAULT_ENV, Armed, FaultPoint, parse
from tests import reaper

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.unit
def test_a_setting_names_a_point_and_on_which_reach_it_kills() -> None:
    assert parse(None) is None
    assert parse("") is None
    assert parse("eviction") == Armed(FaultPoint.EVICTION, 1)
    assert parse("before-publish:7") == Armed(FaultPoint.BEFORE_PUBLISH, 7)
    assert {p.value for p in FaultPoint} >= {
        "attempt-written",
        "ledger-transaction",
        "before-publish",
        "before-materialization",
        "upquery-fill",
        "capture-append",
        "replay-step",
        "eviction",
    }


@pytest.mark.unit
@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("commit", "'commit' is not a fault point (known: attempt-written,"),
        ("eviction:0", "the count '0' is not a whole number >= 1"),
        ("eviction:x", "the count 'x' is not a whole number >= 1"),
        ("eviction:-1", "the count '-1' is not a whole number >= 1"),
    ],
)
def test_a_bad_setting_is_refused_naming_it(value: str, reason: str) -> None:
    with pytest.raises(FaultSpecError, match="no fault point was armed") as err:
        parse(value)
    assert isinstance(err.value, EpochgateError)
    assert err.value.value == value
    assert str(err.value).startswith(f"EPOCHGATE_FAULT={value!r}: {reason}")


REACH = """
from progress import faults
from progress.faults import FaultPoint
for n in range(3):
    faults.reach(FaultPoint.EVICTION)
    print("past eviction", n + 1, flush=True)
faults.reach(FaultPoint.UPQUERY_FILL)
print("finished", flush=True)
"""


def _reach(setting: str | None) -> subprocess.CompletedProcess[str]:
    env = {"PYTHONPATH": str(REPO), **reaper.marks()}
    if setting is not None:
        env[FAULT_ENV] = setting
    return subprocess.run(
        [sys.executable, "-c", REACH], env=env, capture_output=True, text=True, check=False
    )


@pytest.mark.faults
def test_the_process_dies_by_sigkill_on_the_armed_reach_of_its_point() -> None:
    killed = _reach("eviction:2")
    assert killed.returncode == -signal.SIGKILL
    assert killed.stdout.splitlines() == ["past eviction 1"]
    assert killed.stderr == "epochgate fault: killed at eviction (reached 2 times)\n"
    unarmed = _reach(None)
    assert unarmed.returncode == 0
    assert unarmed.stdout.splitlines()[-1] == "finished"
    never = _reach("eviction:4")  # reached 3 times only
    assert never.returncode == 0
    bad = _reach("nowhere")
    assert bad.returncode == 1
    assert "EPOCHGATE_FAULT='nowhere': 'nowhere' is not a fault point" in bad.stderr
