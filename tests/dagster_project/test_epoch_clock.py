"""Scheduled epochs under Dagster: the epoch clock sensor opens epochs as partitions and closes
them by each source's rule; the frontier sensor then runs them, and the results equal the same
sums in DuckDB SQL over the raw files."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import dagster as dg
import duckdb
import pytest
from pyspark.sql import SparkSession

from dagster_project.definitions import build_definitions
from dagster_project.names import clock_sensor_name
from dagster_project.partitions import epoch_key, partitions_name
from dagster_project.resources import LedgerResource, SparkResource
from pipelines.run.runtime import Runtime
from tests.dagster_project.driver import Driver, skip_text
from tests.fixtures.feeds import GRACE, SOURCES, at, feeds, mark, write_input

pytestmark = [pytest.mark.dagster, pytest.mark.spark]


class FakeTime:
    """The time the epoch clock sensor sees, moved by the test."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def test_the_clock_opens_and_closes_epochs_and_the_frontier_sensor_runs_them(
    tmp_path: Path, spark: SparkSession, instance: dg.DagsterInstance
) -> None:
    markers, raw = tmp_path / "markers", tmp_path / "raw"
    pipeline = feeds(markers)
    time = FakeTime(at(0.5))
    ledger = LedgerResource(path=str(tmp_path / "home" / "ledger.duckdb"))
    defs = build_definitions(
        [pipeline],
        spark=SparkResource(master="local[2]", conf={"spark.sql.shuffle.partitions": "2"}),
        ledger=ledger,
        now=time,
    )
    drive = Driver(defs, instance, pipeline="feeds")
    rt = Runtime(pipeline, ledger.ledger(), spark, ledger.data_root)

    # Half past midnight: epoch 0 is open; every worker sends its data for it.
    for source, workers in SOURCES.items():
        for w in range(workers):
            rt.input(source, w).send(write_input(raw, source, 0, w))
    rt.input("manual", 0).advance_to(1)  # the explicit source's worker closes epoch 0 itself
    opened = skip_text(drive.tick(clock_sensor_name("feeds")))
    assert "feeds: epochs opened by 2026-11-02T00:30:00+00:00: up to epoch 0." in opened
    assert "source events, worker 1 holds epoch 0 until 2026-11-02T01:10:00+00:00." in opened
    assert instance.get_dynamic_partitions(partitions_name("feeds")) == [epoch_key(0)]
    mark(markers, 0, 0)
    drive.drive()  # only manual_out can run: the others wait for the clock and a marker
    assert {r.stages for r in drive.runs} == {("manual_out",)}
    waiting = skip_text(drive.tick())
    marker = markers / "epoch=0" / "worker=1.done"
    assert (
        "source events, worker 1, still holds epoch 0 (until 2026-11-02T01:10:00+00:00); "
        f"source files, worker 1, still holds epoch 0 (until its done-marker {marker})."
    ) in waiting

    # Ten past one: epoch 0 has ended and its grace is over; the last marker arrives.
    time.now = at(1) + GRACE
    mark(markers, 0, 1)
    drive.drive()
    assert sorted(instance.get_dynamic_partitions(partitions_name("feeds"))) == [
        epoch_key(0),
        epoch_key(1),
    ]
    book = ledger.ledger()
    done = {s.stage: s.done for s in book.status("feeds") if not s.is_input}
    assert done == {"events_out": (0,), "files_out": (0,), "manual_out": (0,)}
    for source in SOURCES:
        (row,) = rt.read(f"{source}_out", 0).collect()
        expected = (
            duckdb.connect()
            .execute(f"SELECT sum(n), count(*) FROM read_parquet('{raw}/{source}/epoch=0/*')")
            .fetchone()
        )
        assert (row["total"], row["rows"]) == expected
    assert book.verify().ok
    # A late file for epoch 0 can no longer join it: its worker is at epoch 1 now.
    assert rt.input("events", 0).epoch == 1
