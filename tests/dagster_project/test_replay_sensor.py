"""The replay sensor on a real Dagster instance: each tick feeds the captures' new events and
counts them in its cursor; the frontier sensor then runs what they made ready, and the outputs
equal DuckDB SQL over the captured files."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest
from pyspark.sql import SparkSession

from dagster_project.definitions import build_definitions
from dagster_project.names import replay_sensor_name
from dagster_project.resources import LedgerResource, SparkResource
from pipelines.run.runtime import Runtime
from pipelines.testing import rows_of
from tests.dagster_project.driver import Driver
from tests.fixtures.handmade_captures import Capture, advance, done, epochs, stream_rows
from tests.pipelines.capture.test_replay import oracle, replayed

pytestmark = [pytest.mark.dagster, pytest.mark.spark]

SENSOR = replay_sensor_name("replayed")


def tick(defs: dg.Definitions, instance: dg.DagsterInstance, cursor: str | None) -> tuple[str, str]:
    """Evaluate the replay sensor once, as the daemon does: its skip reason and new cursor."""
    sensor = defs.resolve_sensor_def(SENSOR)
    context = dg.build_sensor_context(
        instance=instance,
        cursor=cursor,
        definitions=defs,
        resources=dict(defs.resources or {}),
    )
    with context:
        data = sensor.evaluate_tick(context)
    assert not data.run_requests
    return data.skip_message or "", data.cursor or ""


def test_the_replay_sensor_feeds_and_the_frontier_sensor_runs(
    tmp_path: Path, spark: SparkSession, instance: dg.DagsterInstance
) -> None:
    a, b = Capture(tmp_path / "a"), Capture(tmp_path / "b")
    epochs(a, stream_rows(0))
    epochs(b, stream_rows(1), until=1)  # b holds epoch 1
    pipeline = replayed([a.directory, b.directory], 2)
    ledger = LedgerResource(path=str(tmp_path / "home" / "ledger.duckdb"))
    defs = build_definitions(
        [pipeline],
        spark=SparkResource(master="local[2]", conf={"spark.sql.shuffle.partitions": "2"}),
        ledger=ledger,
    )
    drive = Driver(defs, instance, pipeline="replayed")

    text, cursor = tick(defs, instance, None)
    assert (text, cursor) == (
        "Fed 9 captured event(s) into replayed (9 in all); the frontier sensor runs what they "
        "made ready.",
        "9",
    )
    drive.drive()
    book = ledger.ledger()
    assert book.done_epochs("replayed", "totals") == [0]
    assert tick(defs, instance, cursor) == (
        "No new captured event for replayed (9 fed in all).",
        "9",
    )

    rows = stream_rows(1)
    b.add(b.messages(1, rows[1]), advance(1, 2), b.messages(2, rows[2]), advance(2, 3), done(3))
    text, cursor = tick(defs, instance, cursor)
    assert cursor == "14"
    assert text.startswith("Fed 5 captured event(s) into replayed (14 in all)")
    drive.drive()
    assert book.done_epochs("replayed", "totals") == [0, 1, 2]
    rt = Runtime(pipeline, book, spark, ledger.data_root)
    for epoch in range(3):
        assert set(rows_of(rt, "totals", epoch)) == oracle([a.directory, b.directory], epoch)
