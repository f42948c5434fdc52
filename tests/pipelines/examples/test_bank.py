"""The bank example end to end, late data included, against DuckDB SQL over the raw inputs."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from pipelines.examples.bank_data import ORACLE_SQL
from pipelines.examples.demo import run_demo
from progress.ledger import Ledger

pytestmark = pytest.mark.spark


def test_every_stage_of_bank_matches_the_oracle(tmp_path: Path, spark: SparkSession) -> None:
    lines: list[str] = []
    summary = run_demo(
        tmp_path / "demo", epochs=4, rows=400, accounts=30, seed=7, echo=lines.append
    )
    assert summary.mismatches == ()
    assert summary.runs == len(ORACLE_SQL) * 4
    text = "\n".join(lines)
    assert "source card_payments, worker 2, still holds epoch 2" in text
    # The bad accounts file of epoch 0 stops enriched there, naming the expectation, until the
    # correction; the drop of card payments that are no debit is counted.
    assert "stage enriched epoch 0 failed expectation region_known: " in text
    assert "enriched epoch 0 waits: stage enriched epoch 0 failed expectation region_known" in text
    assert "correcting accounts at epoch 0 with the right file" in text
    assert "enriched.region_known (fail): 0 of" in text
    assert "stopped 1 run(s): epoch 0 (" in text
    assert "valid_cards.debit (drop): " in text
    assert f"{len(ORACLE_SQL)} stages x 4 epochs verified" in text
    ledger = Ledger(tmp_path / "demo" / "ledger.duckdb")
    assert ledger.verify().ok
    status = {s.stage: s for s in ledger.status("bank")}
    assert all(status[stage].done == (0, 1, 2, 3) for stage in ORACLE_SQL)
