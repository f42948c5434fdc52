"""Capture, then replay: `bank` captured as it runs with a late worker, replayed into fresh
pipelines on other ledgers, gives the same outputs epoch by epoch, on any number of workers,
and those of the DuckDB oracle over the raw inputs."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from pipelines.examples.bank import (
    BALANCES,
    WORKERS,
    category_totals,
    update_balances,
    validate_cards,
)
from pipelines.examples.bank_data import Oracle
from pipelines.examples.demo import verify_outputs
from pipelines.run.runtime import Runtime
from pipelines.stages.pipeline import Pipeline
from pipelines.testing import rows_of
from progress.ledger import Ledger
from tests.fixtures import captures

pytestmark = pytest.mark.spark

CARD_WORKERS = WORKERS["card_payments"]
EPOCHS = range(captures.EPOCHS)


@dataclass
class Upstream:
    home: Path
    rt: Runtime
    held: Path
    """Copies of the captures taken while card worker 2 held the late epoch."""

    def movements(self) -> Path:
        return self.home / "cap" / "movements"

    def cards(self, root: Path | None = None) -> list[Path]:
        base = root or self.home / "cap"
        return [base / f"cards-{w}" for w in range(CARD_WORKERS)]


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory, spark: SparkSession) -> Upstream:
    """`bank` (no rings) with ``movements`` and each card worker captured from the start."""
    home = tmp_path_factory.mktemp("upstream")
    data = captures.inputs(home / "raw")
    rt = captures.runtime(home, spark)
    up = Upstream(home, rt, home / "held")
    rt.capture("movements", up.movements())
    for w, directory in enumerate(up.cards()):
        rt.capture("card_payments", directory, worker=w)
    for epoch in EPOCHS:
        captures.send_epoch(rt, data, epoch)
        rt.run()
    shutil.copytree(home / "cap", up.held)
    captures.release_late(rt, data, captures.EPOCHS - 1)
    rt.run()
    return up


def fresh(home: Path, spark: SparkSession, pipeline: Pipeline) -> Runtime:
    return Runtime(pipeline, Ledger(home / "ledger.duckdb"), spark, home / "data")


def rows(rt: Runtime, stage: str, epoch: int) -> list[tuple[object, ...]]:
    return sorted(rows_of(rt, stage, epoch), key=repr)


def test_a_replayed_stage_stream_gives_the_same_outputs_on_another_ledger(
    upstream: Upstream, tmp_path: Path, spark: SparkSession
) -> None:
    p = Pipeline("replayed")
    movements = p.replay("movements", upstream.movements())
    p.transform("category_totals", movements, fn=category_totals)
    p.stateful("balances", movements, key=["account_id"], schema=BALANCES, update=update_balances)
    down = fresh(tmp_path, spark, p)
    down.run()
    up = upstream.rt
    accounts = sorted({r[1] for e in EPOCHS for r in rows(up, "movements", e)}, key=repr)
    assert accounts
    for epoch in EPOCHS:
        assert rows(down, "movements", epoch) == rows(up, "movements", epoch)
        assert rows(down, "category_totals", epoch) == rows(up, "category_totals", epoch)
        ours = down.lookup("balances", accounts, as_of=epoch)
        theirs = up.lookup("balances", accounts, as_of=epoch)
        assert sorted(ours.rows, key=repr) == sorted(theirs.rows, key=repr)
    assert down.replay() == 0  # nothing new: nothing fed twice
    assert {s.stage: s.done for s in down.status()}["category_totals"] == tuple(EPOCHS)
    # Every replayed stage at every epoch, and lookups as of each, against SQL over the raw files.
    assert verify_outputs(down, Oracle(upstream.home / "raw"), captures.EPOCHS, accounts) == []


@pytest.mark.parametrize("workers", [1, 2, 5])
def test_a_capture_per_producer_worker_replays_on_any_number_of_workers(
    upstream: Upstream, tmp_path: Path, spark: SparkSession, workers: int
) -> None:
    p = Pipeline("cards")
    cards = p.replay("card_payments", upstream.cards(), workers=workers)
    p.transform("valid_cards", cards, fn=validate_cards)
    down = fresh(tmp_path, spark, p)
    down.run()
    for epoch in EPOCHS:
        assert rows(down, "valid_cards", epoch) == rows(upstream.rt, "valid_cards", epoch)


def test_the_replayed_frontier_waits_for_every_stream(
    upstream: Upstream, tmp_path: Path, spark: SparkSession
) -> None:
    """Replayed from copies taken while card worker 2 held the late epoch: the epochs before it
    run, the held one waits and names the replayed worker that holds it; once the complete
    captures are replayed into the same ledger it runs with everything."""
    p = Pipeline("cards")
    cards = p.replay("card_payments", upstream.cards(upstream.held), workers=2)
    p.transform("valid_cards", cards, fn=validate_cards)
    down = fresh(tmp_path, spark, p)
    down.run()
    assert {s.stage: s.done for s in down.status()}["valid_cards"] == (0,)
    # stream 2 (card worker 2) goes to replayed worker 2 % 2 = 0
    assert down.blockers("valid_cards", captures.LATE) == [
        f"source card_payments, worker 0, still holds epoch {captures.LATE}"
    ]
    for held, complete in zip(upstream.cards(upstream.held), upstream.cards(), strict=True):
        shutil.rmtree(held)
        shutil.copytree(complete, held)
    down.run()
    for epoch in EPOCHS:
        assert rows(down, "valid_cards", epoch) == rows(upstream.rt, "valid_cards", epoch)
