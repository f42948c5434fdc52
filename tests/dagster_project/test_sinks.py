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
from tests.dagster_project.browser import VIEWPORT, chromium, metadata_entry
from tests.dagster_project.dagster_dev import REPO, DagsterDev
from tests.dagster_project.driver import Driver
from tests.dagster_project.scenario import local_definitions
from tests.dagster_project.test_delays import materialization
from tests.fixtures.exports import pipeline, send, write_input

pytestmark = [pytest.mark.dagster, pytest.mark.spark]

SCREENSHOT = REPO / "tests" / "artifacts" / "sink_asset.png"


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


@pytest.mark.browser
def test_the_ui_shows_where_each_epoch_of_a_table_sink_was_published(
    tmp_path: Path,
    spark: SparkSession,
    ui_home: Path,
    webserver: DagsterDev,
    chromium_executable: str,
) -> None:
    """A Delta sink's epochs materialized into the instance the UI serves: the sink's asset
    page shows the format, the location and the table's version of its latest epoch."""
    sales = pipeline("delta")
    ledger = LedgerResource(path=str(tmp_path / "home" / "ledger.duckdb"))
    rt = Runtime(sales, ledger.ledger(), spark, ledger.data_root)
    send(rt, {e: write_input(tmp_path / "raw", e) for e in range(2)})
    with dg.DagsterInstance.from_config(str(ui_home)) as instance:
        Driver(local_definitions(sales, ledger), instance, pipeline="sales").drive()
    (state,) = rt.sinks()
    wanted = {"format": "delta", "location": state.location, "table_version": "1"}
    url = f"http://127.0.0.1:{webserver.port}/assets/sales/export?view=events"
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    with chromium(chromium_executable) as browser:
        page = browser.new_page(viewport={"width": VIEWPORT["width"], "height": VIEWPORT["height"]})
        try:
            page.goto(url, wait_until="domcontentloaded")
            shown = {name: metadata_entry(page, name, cell=1) for name in wanted}
        finally:
            page.screenshot(path=SCREENSHOT, full_page=True)
    webserver.check_alive()
    assert shown == wanted, f"the sink's asset page {url} shows {shown} (screenshot: {SCREENSHOT})"
