"""Fixtures for ledger tests: a small bank-like graph and a fresh ledger file."""

from __future__ import annotations

from pathlib import Path

import pytest

from progress import Delay, Graph, GraphBuilder, Source, Target
from progress.ledger import Ledger


def bank_graph(extra_stage: bool = False) -> Graph:
    b = GraphBuilder()
    b.add_node("card_payments", inputs=0, outputs=1, workers=3)
    b.add_node("validate", inputs=1, outputs=1, workers=0)
    b.add_node("totals", inputs=1, outputs=1, workers=0, summaries={(0, 0): [Delay(0)]})
    b.add_edge(Source("card_payments"), Target("validate"))
    b.add_edge(Source("validate"), Target("totals"))
    if extra_stage:
        b.add_node("audit", inputs=1, outputs=1, workers=0)
        b.add_edge(Source("validate"), Target("audit"))
    return b.compile()


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    led = Ledger(tmp_path / "ledger.duckdb", lock_timeout=30)
    led.register("bank", bank_graph())
    return led
