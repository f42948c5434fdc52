"""Golden progress-tracking cases: each file under ``golden/`` is one test."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.progress.golden_script import run_script

pytestmark = pytest.mark.unit

CASES = sorted((Path(__file__).parent / "golden").glob("*.txt"))


def test_cases_exist() -> None:
    assert len(CASES) >= 6


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_golden(path: Path) -> None:
    run_script(path)
