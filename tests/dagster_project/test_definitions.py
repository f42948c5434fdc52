"""The Definitions built from pipelines: the asset graph is the pipelines' lineage."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest
from pyspark.sql import types as T

from dagster_project.definitions import build_definitions, daemon_interval
from dagster_project.names import LEDGER_CHECK, check_key, stage_key
from dagster_project.resources import LedgerResource, SparkResource, StateStoreResource
from pipelines.examples import bank
from pipelines.settings import DATA_ENV, HOME_ENV, LEDGER_ENV, Settings
from pipelines.spark.session import SPARK_ENV
from pipelines.stages.pipeline import Pipeline
from tests.fixtures.shop import shop

pytestmark = pytest.mark.dagster

NUMBERS = T.StructType([T.StructField("n", T.LongType())])


def looped() -> Pipeline:
    """A pipeline with a loop: ``grow`` reads its own output one epoch later."""
    p = Pipeline("looped")
    numbers = p.source("numbers", schema=NUMBERS)
    back = p.feedback("previous", delay=1)
    merged = p.union("merged", numbers, back)
    grown = p.transform("grow", merged, fn=lambda df: df)
    p.connect(back, grown)
    return p


def edges(pipeline: Pipeline) -> dict[dg.AssetKey, set[dg.AssetKey]]:
    return {
        stage_key(pipeline.name, name): {stage_key(pipeline.name, u) for u in stage.inputs}
        for name, stage in pipeline.stages.items()
    }


def parents(defs: dg.Definitions, pipeline: str) -> dict[dg.AssetKey, set[dg.AssetKey]]:
    graph = defs.resolve_asset_graph()
    return {
        key: set(graph.get(key).parent_keys)
        for key in graph.get_all_asset_keys()
        if key.path[0] == pipeline
    }


def test_the_asset_graph_is_the_pipelines_lineage(tmp_path: Path) -> None:
    pipeline = bank.pipeline()
    defs = build_definitions([pipeline], ledger=LedgerResource(path=str(tmp_path / "l.duckdb")))
    assert parents(defs, "bank") == edges(pipeline)
    graph = defs.resolve_asset_graph()
    for name, stage in pipeline.stages.items():
        node = graph.get(stage_key("bank", name))
        assert node.group_name == "bank"
        assert node.kinds == {"spark"}
        assert node.partitions_def == dg.DynamicPartitionsDefinition(name="bank_epochs")
        assert node.is_materializable == (not stage.is_source), name
        expected = {dg.AssetCheckKey(node.key, e.name) for e in pipeline.expectations(name)}
        expected |= {check_key("bank", name)}
        assert node.check_keys == (set() if stage.is_source else expected)
    assert "Card payments with a category become debits" in (
        graph.get(stage_key("bank", "valid_cards")).description or ""
    )


def test_each_pipeline_has_an_in_process_job_and_a_frontier_sensor(tmp_path: Path) -> None:
    defs = build_definitions(
        [bank.pipeline(), shop(tmp_path / "export")],
        ledger=LedgerResource(path=str(tmp_path / "l.duckdb")),
        sensor_interval=45,
        sensor_status=dg.DefaultSensorStatus.STOPPED,
    )
    for name in ("bank", "shop"):
        job = defs.resolve_job_def(f"{name}_job")
        assert job.executor_def.name == "in_process"
        assert job.partitions_def == dg.DynamicPartitionsDefinition(name=f"{name}_epochs")
        sensor = defs.resolve_sensor_def(f"{name}_frontier")
        # One second of slack against the daemon's loop, so it ticks every 45 s, not 50.
        assert sensor.minimum_interval_seconds == daemon_interval(45) == 44
        assert sensor.default_status == dg.DefaultSensorStatus.STOPPED
        assert sensor.job_name == f"{name}_job"
    # A pipeline with partial stages (bank's balances) also has an upquery job and sensor,
    # ticking as often as its frontier sensor.
    upquery = defs.resolve_job_def("bank_upquery")
    assert upquery.executor_def.name == "in_process"
    assert upquery.partitions_def is None
    upqueries = defs.resolve_sensor_def("bank_upqueries")
    assert upqueries.minimum_interval_seconds == 44
    assert upqueries.default_status == dg.DefaultSensorStatus.STOPPED
    assert upqueries.job_name == "bank_upquery"
    # Runs of other selections (a backfill's, the UI's) run in one process too.
    assert defs.resolve_implicit_global_asset_job_def().executor_def.name == "in_process"
    names = {s.name for s in defs.sensors or ()}
    assert "shop_upqueries" not in names
    dg.Definitions.validate_loadable(defs)  # what a code server checks (unique op names)
    assert parents(defs, "shop") == edges(shop(tmp_path / "export"))
    settled = defs.resolve_asset_graph().get(stage_key("shop", "settled"))
    assert "belongs to epoch t + 2" in (settled.description or "")
    export = defs.resolve_asset_graph().get(stage_key("shop", "export"))
    assert export.check_keys == {dg.AssetCheckKey(stage_key("shop", "export"), LEDGER_CHECK)}


def test_a_loop_is_shown_without_its_closing_edge(tmp_path: Path) -> None:
    pipeline = looped()
    defs = build_definitions([pipeline], ledger=LedgerResource(path=str(tmp_path / "l.duckdb")))
    expected = edges(pipeline)
    expected[stage_key("looped", "previous")] = set()  # the edge grow -> previous closes the loop
    assert parents(defs, "looped") == expected


def test_pipelines_with_one_name_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="pipelines named more than once: bank"):
        build_definitions([bank.pipeline(), bank.pipeline(rings=False)])


def test_resources_come_from_the_environment_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(HOME_ENV, str(tmp_path / "home"))
    monkeypatch.delenv(LEDGER_ENV, raising=False)
    monkeypatch.setenv(DATA_ENV, str(tmp_path / "elsewhere"))
    monkeypatch.setenv(SPARK_ENV, "sc://127.0.0.1:15002")
    resources = build_definitions([bank.pipeline()]).resources or {}
    ledger, spark, state = resources["ledger"], resources["spark"], resources["state"]
    assert isinstance(ledger, LedgerResource)
    assert ledger.ledger_path == (tmp_path / "home" / "ledger.duckdb").resolve()
    assert ledger.data_root == (tmp_path / "elsewhere").resolve()
    assert isinstance(spark, SparkResource)
    assert spark.master == "sc://127.0.0.1:15002"
    assert isinstance(state, StateStoreResource)
    assert state.state_path(ledger) == (tmp_path / "home" / "state.duckdb").resolve()


def test_resources_resolve_a_relative_home_as_the_command_line_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(HOME_ENV, "state")
    monkeypatch.delenv(LEDGER_ENV, raising=False)
    monkeypatch.delenv(DATA_ENV, raising=False)
    where = Settings.resolve()
    ledger = LedgerResource.from_settings()
    assert (ledger.ledger_path, ledger.data_root) == (where.ledger, where.data)
    assert StateStoreResource().state_path(ledger) == where.state == tmp_path / "state/state.duckdb"
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    assert LedgerResource(path="~/l.duckdb").ledger_path == tmp_path / "user/l.duckdb"


def test_workspace_loads_the_bank_example() -> None:
    from dagster_project.examples.bank import defs

    assert parents(defs, "bank") == edges(bank.pipeline())


def test_a_transform_not_materialized_is_an_asset_that_says_so(tmp_path: Path) -> None:
    pipeline = bank.pipeline(rings=False, materialize=False)
    defs = build_definitions([pipeline], ledger=LedgerResource(path=str(tmp_path / "l.duckdb")))
    assert parents(defs, "bank") == edges(pipeline)  # its lineage is the same
    node = defs.resolve_asset_graph().get(stage_key("bank", "valid_cards"))
    assert node.metadata["materialized"] is False
    assert "not materialized: recomputed inside each stage that reads it" in (
        node.description or ""
    )
    movements = defs.resolve_asset_graph().get(stage_key("bank", "movements"))
    assert "materialized" not in movements.metadata
