"""What the project asks of a Dagster instance: stage runs share the ``spark`` pool, which the
project's ``dagster.yaml`` limits to 2 runs at once; the sensor's interval is a setting."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import dagster as dg
import pytest

import dagster_project.examples.bank
import dagster_project.settings
from dagster_project.assets import POOL
from dagster_project.definitions import build_definitions
from dagster_project.dev.instance import INSTANCE_CONFIG, instance_home
from dagster_project.names import job_name, sensor_name, stage_key
from dagster_project.resources import LedgerResource
from dagster_project.sensors import DEFAULT_INTERVAL
from dagster_project.settings import SENSOR_INTERVAL_ENV
from pipelines.examples import bank

pytestmark = pytest.mark.dagster


def test_every_stage_runs_in_the_spark_pool(tmp_path: Path) -> None:
    pipeline = bank.pipeline()
    defs = build_definitions([pipeline], ledger=LedgerResource(path=str(tmp_path / "l.duckdb")))
    for name, stage in pipeline.stages.items():
        if not stage.is_source:
            assert defs.resolve_assets_def(stage_key("bank", name)).op.pool == POOL == "spark"
    assert defs.resolve_job_def(job_name("bank")).graph.pools == {"spark"}


def test_the_projects_instance_limits_the_spark_pool_to_two(tmp_path: Path) -> None:
    home = instance_home(tmp_path)
    assert home == (tmp_path / "dagster").resolve()
    assert (home / "dagster.yaml").read_text() == INSTANCE_CONFIG.read_text()
    instance = dg.DagsterInstance.from_config(str(home))
    try:
        storage = instance.event_log_storage
        assert storage.get_concurrency_info("spark").limit == 2
        # What the run queue does before it launches a run of the pool.
        storage.initialize_concurrency_limit_to_default("spark")
        assert [(p.name, p.limit) for p in storage.get_pool_limits()] == [("spark", 2)]
        assert storage.get_concurrency_info("spark").slot_count == 2
        pools = instance.get_concurrency_config().pool_config
        assert pools.pool_granularity is not None
        assert pools.pool_granularity.value == "run"  # a run waits queued for its slot
    finally:
        instance.dispose()


def test_an_instance_directory_keeps_its_own_settings(tmp_path: Path) -> None:
    mine = "concurrency:\n  pools:\n    default_limit: 5\n"
    (tmp_path / "dagster").mkdir()
    (tmp_path / "dagster" / "dagster.yaml").write_text(mine)
    assert (instance_home(tmp_path) / "dagster.yaml").read_text() == mine


@pytest.fixture
def reload_definitions(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """The bank example's code location, to be reloaded under a changed environment; reloaded
    again under the original one afterwards."""
    yield dagster_project.examples.bank
    monkeypatch.undo()
    importlib.reload(dagster_project.examples.bank)


def test_the_sensor_interval_comes_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, reload_definitions: ModuleType
) -> None:
    monkeypatch.delenv(SENSOR_INTERVAL_ENV, raising=False)
    defs = importlib.reload(reload_definitions).defs
    # The daemon's minimum is one second less: its loop then ticks the sensor every 30 s.
    assert defs.resolve_sensor_def(sensor_name("bank")).minimum_interval_seconds == 29
    assert DEFAULT_INTERVAL == 30

    monkeypatch.setenv(SENSOR_INTERVAL_ENV, "3")
    defs = importlib.reload(reload_definitions).defs
    assert defs.resolve_sensor_def(sensor_name("bank")).minimum_interval_seconds == 2


@pytest.mark.parametrize("value", ["0", "-1", "1.5", "soon", "\u0663"])
def test_a_sensor_interval_that_is_not_whole_seconds_is_refused(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv(SENSOR_INTERVAL_ENV, value)
    with pytest.raises(ValueError, match=f"^{SENSOR_INTERVAL_ENV} must be a whole number"):
        dagster_project.settings.sensor_interval_setting()
