"""`progress` imports neither Spark nor Dagster (nor any database, outside its ledger module)."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.unit


def test_progress_imports_no_engine() -> None:
    code = (
        "import sys, progress; "
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'pyspark', 'dagster', 'duckdb', 'pandas', 'pyarrow'}); print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert out.stdout.strip() == "[]"
