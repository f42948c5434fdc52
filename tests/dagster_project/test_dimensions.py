"""A dimension source in Dagster: its asset says what it is, and the frontier sensor's run key
follows the table its readers read (so a corrected table is requested again)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import types as T

from dagster_project.definitions import build_definitions
from dagster_project.names import stage_key
from dagster_project.resources import LedgerResource
from dagster_project.sensors import read_tick
from pipelines.stages.pipeline import Pipeline
from progress.ledger import Ledger, MessageEntry, Origin, RunKind

pytestmark = pytest.mark.dagster

ORDERS = T.StructType(
    [T.StructField("order_id", T.LongType()), T.StructField("account", T.StringType())]
)
ACCOUNTS = T.StructType(
    [T.StructField("account", T.StringType()), T.StructField("tier", T.StringType())]
)


def desk() -> Pipeline:
    p = Pipeline("desk")
    orders = p.source("orders", schema=ORDERS)
    accounts = p.dimension("accounts", schema=ACCOUNTS, workers=2)
    p.join("orders_by_tier", orders, accounts, on=["account"])
    return p


def test_a_dimension_source_is_an_external_asset_that_says_it_is_a_table(tmp_path: Path) -> None:
    defs = build_definitions([desk()], ledger=LedgerResource(path=str(tmp_path / "l.duckdb")))
    node = defs.resolve_asset_graph().get(stage_key("desk", "accounts"))
    assert not node.is_materializable
    assert (node.description or "").startswith("Dimension source with 2 worker(s): its content")
    spec = next(s for s in defs.resolve_all_asset_specs() if s.key == node.key)
    assert (spec.metadata["stage_kind"], spec.metadata["workers"]) == ("dimension", 2)


def test_the_run_key_of_a_reader_follows_the_table_as_of_its_epoch(tmp_path: Path) -> None:
    pipeline, ledger = desk(), Ledger(tmp_path / "ledger.duckdb")
    pipeline.register(ledger)
    for epoch in range(3):
        ledger.send(
            "desk", "orders", 0, MessageEntry("orders", 0, epoch, f"o{epoch}", f"/o{epoch}")
        )
        ledger.advance("desk", "orders", 0, epoch + 1, seal=True)
    ledger.send("desk", "accounts", 0, MessageEntry("accounts", 0, 0, "t0", "/t0"))
    for worker in (0, 1):
        ledger.close("desk", "accounts", worker)
    for epoch in (0, 1):  # the reader has run epochs 0 and 1
        batch = ledger.tracker("desk").stage_batch("orders_by_tier", epoch)
        out = MessageEntry("orders_by_tier", 0, epoch, f"j{epoch}", f"/j{epoch}")
        origin = Origin.stage("orders_by_tier", epoch, RunKind.RUN)
        ledger.commit("desk", batch, key=f"run:{epoch}", messages=[out], origin=origin)
    (before,) = read_tick(ledger, pipeline).work
    assert (before.epoch, before.stages) == (2, ("orders_by_tier",))

    # Worker 0's table of epoch 0 is corrected: the reader at epoch 2 will read the new one.
    fixed = MessageEntry("accounts", 0, 0, "t0-fixed", "/t0-fixed", replaces=True)
    ledger.commit("desk", [], key="correct", messages=[fixed], origin=Origin.input("accounts", 0))
    (after,) = read_tick(ledger, pipeline).work
    assert (after.epoch, after.stages) == (2, ("orders_by_tier",))
    assert after.run_key != before.run_key
    assert read_tick(ledger, pipeline).work == (after,)  # the same work, the same key
