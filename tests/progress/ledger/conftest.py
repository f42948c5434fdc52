"""Fixtures for ledger tests: a small bank-like graph and a fresh ledger file."""

from __future__ import annotations

from pathlib import Path

import pytest

from progress.ledger import Ledger
from tests.progress.ledger.scenario import bank_graph


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    led = Ledger(tmp_path / "ledger.duckdb", lock_timeout=30)
    led.register("bank", bank_graph())
    return led
