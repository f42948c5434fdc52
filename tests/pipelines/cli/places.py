"""Where a command-line test's commands act: its pipeline reference, ledger and data."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from pipelines.cli.main import main


def on(reference: str, root: Path) -> list[str]:
    """``-p REFERENCE --ledger ROOT/ledger.duckdb --data ROOT/data``."""
    return ["-p", reference, "--ledger", str(root / "ledger.duckdb"), "--data", str(root / "data")]


def run(capsys: pytest.CaptureFixture[str], argv: Sequence[str]) -> tuple[int, str, str]:
    """``epochgate ARGV`` in this process: its exit status, standard output and error."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err
