"""Where a command-line test's commands act: its pipeline reference, ledger and data."""

from __future__ import annotations

from pathlib import Path


def on(reference: str, root: Path) -> list[str]:
    """``-p REFERENCE --ledger ROOT/ledger.duckdb --data ROOT/data``."""
    return ["-p", reference, "--ledger", str(root / "ledger.duckdb"), "--data", str(root / "data")]
