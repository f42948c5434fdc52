"""A sink's materializations in Dagster name where each epoch was published: the format, the
location and, for a Delta or Iceberg sink, the table's version after that epoch's commit."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from dagster_project import LedgerResource
from dagster_project.names import stage_key
from pipelines.run.runtime import Runtime
from tests.dagster_project.driver import Driver
from tests.dagster_project.scenario import local_definitions
from tests.dagster_project.test_delays import materialization
from tests.fixtures.exports import pipeline, send, write_input

pytestmark = [pytest.mark.dagster, pytest.mark.spark]


@pytest.mark.parametrize("sink_format", ["parquet", "delta", "iceberg"])
def test_each_materialization_of_a_sink_names_its_format_location_and_version(
    tmp_path: Path, spark: SparkSession, instance: dg.DagsterInstance, sink_format: str
) -> None:
    sales = pipeline(sink_format)
    ledger = LedgerResource(path=str(tmp_path / "home" / "ledger.duckdb"))
    defs = local_definitions(sales, ledger)
    rt = Runtime(sales, ledger.ledger(), spark, ledger.data_root)
    send(rt, {e: write_input(tmp_path / "raw", e) for e in range(2)})
    Driver(defs, instance, pipeline="sales").drive()

    (state,) = rt.sinks()
    first = {"parquet": None, "delta": 0, "iceberg": 1}[sink_format]
    for epoch in range(2):
        shown = materialization(instance, stage_key("sales", "export"), epoch)
        assert (shown["format"], shown["location"]) == (sink_format, state.location)
        if first is None:
            assert "table_version" not in shown
        else:  # each epoch's commit is a version of the table (Iceberg counts from 1)
            assert shown["table_version"] == first + epoch
    if sink_format == "delta":
        assert DeltaTable(str(rt.sink_path("export"))).version() == 1
