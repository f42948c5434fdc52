"""The engine conformance cases (``engine_cases.py``) run in a pytest of their own, in a child
process on the engine its environment names, and every case checked to have passed."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
CASES_FILE = Path(__file__).with_name("engine_cases.py")
BANK_CASE = "test_bank_lookups_upqueries_and_an_eviction_match_the_oracle"


def run_cases(env: dict[str, str], basetemp: Path, *, without: tuple[str, ...] = ()) -> None:
    """Every case of ``engine_cases.py`` but those named in ``without`` (shown on that engine by
    the caller) passes with ``env`` (its ``EPOCHGATE_SPARK`` names the engine)."""
    from tests.pipelines.spark.engine_cases import CASES

    names = {case.__name__ for case in CASES.values()}
    assert set(without) <= names, f"no such case: {sorted(set(without) - names)}"
    # Node ids are relative to the root (the child's cwd): an absolute path deselects nothing.
    deselect = [f"--deselect={CASES_FILE.relative_to(REPO)}::{name}" for name in without]

    done = subprocess.run(
        [
            *(sys.executable, "-m", "pytest", "-q", "-rA", str(CASES_FILE)),
            *("-p", "no:randomly", "-p", "no:xdist", "-p", "no:cacheprovider"),
            *("--basetemp", str(basetemp)),
            *deselect,
        ],
        env=env,
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    said = done.stdout[-6000:] + done.stderr[-2000:]
    assert done.returncode == 0, said
    skipped = re.findall(r"^(?:SKIPPED|XFAIL|XPASS)\b.*$", done.stdout, re.MULTILINE)
    assert not skipped, f"cases that did not run as cases: {skipped}\n{said}"
    passed = set(re.findall(r"^PASSED \S+::(\w+)", done.stdout, re.MULTILINE))
    wanted = [case.__name__ for case in CASES.values() if case.__name__ not in without]
    missing = sorted(name for name in wanted if name not in passed)
    assert not missing, f"cases that did not pass: {missing}\n{said}"
    ran = set(re.findall(r"^\w+ \S+::(\w+)", done.stdout, re.MULTILINE)) & set(without)
    assert not ran, f"cases run though left out: {sorted(ran)}"
