"""A corrected source partition under Dagster: the frontier sensor observes it with a new data
version, so Dagster shows what read the old data stale, and the sensor's runs revise it."""

from __future__ import annotations

import dagster as dg
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from dagster._core.asset_graph_view.asset_graph_view import AssetGraphView, TemporalContext
from dagster._core.definitions.data_version import CachingStaleStatusResolver, StaleStatus
from dagster._time import get_current_datetime

from dagster_project.names import stage_key
from dagster_project.partitions import epoch_key
from pipelines.examples.bank_data import Oracle
from pipelines.examples.demo import verify_outputs
from tests.dagster_project.driver import requested
from tests.dagster_project.scenario import Bank

pytestmark = [pytest.mark.dagster, pytest.mark.spark]


def status(home: Bank, stage: str, epoch: int) -> StaleStatus:
    """What Dagster says of ``stage``'s partition ``epoch`` (a fresh look at the instance)."""
    instance, graph = home.drive.instance, home.defs.resolve_asset_graph()
    now = TemporalContext(effective_dt=get_current_datetime(), last_event_id=None)
    view = AssetGraphView(temporal_context=now, instance=instance, asset_graph=graph)
    resolver = CachingStaleStatusResolver(instance, asset_graph=graph, loading_context=view)
    return resolver.get_status(stage_key("bank", stage), epoch_key(epoch))


def test_a_corrected_source_partition_shows_stale_downstream_until_revised(
    bank_home: Bank,
) -> None:
    home, drive = bank_home, bank_home.drive
    home.send_epoch(0)
    home.close_inputs()
    first = drive.tick()
    observed = {(e.asset_key.path[1], e.partition) for e in first.asset_events}
    assert ("card_payments", epoch_key(0)) in observed
    drive.drive()
    assert status(home, "valid_cards", 0) == StaleStatus.FRESH
    assert drive.tick().asset_events == []  # nothing changed: observed once

    # Worker 0 of card_payments re-delivers epoch 0: larger amounts, one payment fewer.
    (path,) = home.data.files("card_payments", 0, 0)
    table = pq.read_table(path)
    table = table.set_column(3, "amount_cents", pc.multiply(table["amount_cents"], 3)).slice(1)
    pq.write_table(table, path)  # the raw inputs now hold what was re-delivered
    home.rt.input("card_payments", 0).correct(0, path)

    tick = drive.tick()
    # Like a revised stage: what read it is requested, upstream first, in one run per epoch
    # (balances, a stateful stage, is revised on its own run, from epoch 0 on).
    assert requested(tick) == [
        (0, {"valid_cards", "movements", "category_totals", "enriched", "region_totals"})
    ]
    (seen,) = tick.asset_events
    assert isinstance(seen, dg.AssetObservation)
    assert (seen.asset_key, seen.partition) == (stage_key("bank", "card_payments"), epoch_key(0))
    assert seen.metadata["corrected_workers"].value == [0]
    assert status(home, "valid_cards", 0) == StaleStatus.STALE
    assert status(home, "valid_wires", 0) == StaleStatus.FRESH  # it read wires only

    drive.execute(*(tick.run_requests or ()))
    assert status(home, "valid_cards", 0) == StaleStatus.FRESH
    drive.drive()
    ledger = home.ledger.ledger()
    assert ledger.stale("bank") == []
    assert verify_outputs(home.rt, Oracle(home.data.root), 1) == []
    assert ledger.verify().ok
