"""``build_definitions`` for a pipeline of a user's own takes every setting the docs list from
the environment when it is called, and an argument given wins over the environment."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from dagster_project import LedgerResource, SparkResource, StateStoreResource, build_definitions
from dagster_project.names import replay_sensor_name, sensor_name, upquery_sensor_name
from dagster_project.settings import SENSOR_INTERVAL_ENV
from pipelines.settings import DATA_ENV, HOME_ENV, LEDGER_ENV
from pipelines.spark.session import SPARK_ENV
from pipelines.stages.pipeline import Pipeline
from tests.dagster_project.meters import meters
from tests.fixtures.handmade_captures import Capture, epochs, stream_rows
from tests.pipelines.capture.test_replay import replayed

pytestmark = pytest.mark.dagster


def user_pipelines(root: Path) -> list[Pipeline]:
    """``meters`` (a frontier and an upquery sensor) and a pipeline with a replayed source
    (a replay sensor too)."""
    return [meters(), replayed([epochs(Capture(root / "capture"), stream_rows(0)).directory], 1)]


SENSORS = [
    sensor_name("meters"),
    upquery_sensor_name("meters"),
    sensor_name("replayed"),
    replay_sensor_name("replayed"),
]


def intervals(defs: dg.Definitions) -> dict[str, int | None]:
    return {name: defs.resolve_sensor_def(name).minimum_interval_seconds for name in SENSORS}


def resources(defs: dg.Definitions) -> tuple[SparkResource, LedgerResource, StateStoreResource]:
    found = defs.resources or {}
    spark, ledger, state = found["spark"], found["ledger"], found["state"]
    assert isinstance(spark, SparkResource)
    assert isinstance(ledger, LedgerResource)
    assert isinstance(state, StateStoreResource)
    return spark, ledger, state


def test_every_setting_is_read_from_the_environment_when_build_definitions_is_called(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pipelines = user_pipelines(tmp_path)
    monkeypatch.setenv(SENSOR_INTERVAL_ENV, "5")
    monkeypatch.setenv(SPARK_ENV, "sc://127.0.0.1:15002")
    monkeypatch.setenv(HOME_ENV, str(tmp_path / "home"))
    monkeypatch.setenv(LEDGER_ENV, str(tmp_path / "elsewhere" / "ledger.duckdb"))
    monkeypatch.setenv(DATA_ENV, str(tmp_path / "data"))
    defs = build_definitions(pipelines)
    # One second less than the interval, against the daemon's loop (``daemon_interval``).
    assert intervals(defs) == dict.fromkeys(SENSORS, 4)
    spark, ledger, state = resources(defs)
    assert spark.master == "sc://127.0.0.1:15002"
    assert ledger.ledger_path == tmp_path / "elsewhere" / "ledger.duckdb"
    assert ledger.data_root == tmp_path / "data"
    assert state.state_path(ledger) == tmp_path / "elsewhere" / "state.duckdb"

    # Read at each call, not once: a later call sees the environment as it is then.
    monkeypatch.setenv(SENSOR_INTERVAL_ENV, "12")
    monkeypatch.delenv(LEDGER_ENV)
    monkeypatch.delenv(DATA_ENV)
    monkeypatch.delenv(SPARK_ENV)
    defs = build_definitions(pipelines)
    assert intervals(defs) == dict.fromkeys(SENSORS, 11)
    spark, ledger, _ = resources(defs)
    assert spark.master == "local[2]"
    assert ledger.ledger_path == tmp_path / "home" / "ledger.duckdb"
    assert ledger.data_root == tmp_path / "home" / "data"

    monkeypatch.delenv(SENSOR_INTERVAL_ENV)
    assert intervals(build_definitions(pipelines)) == dict.fromkeys(SENSORS, 29)  # 30 s


def test_an_argument_given_wins_over_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SENSOR_INTERVAL_ENV, "5")
    monkeypatch.setenv(SPARK_ENV, "sc://127.0.0.1:15002")
    monkeypatch.setenv(LEDGER_ENV, str(tmp_path / "from-env.duckdb"))
    ledger = LedgerResource(path=str(tmp_path / "given.duckdb"))
    defs = build_definitions(
        user_pipelines(tmp_path),
        sensor_interval=45,
        spark=SparkResource(master="local[1]"),
        ledger=ledger,
        state=StateStoreResource(path=str(tmp_path / "given-state.duckdb")),
    )
    assert intervals(defs) == dict.fromkeys(SENSORS, 44)
    spark, found, state = resources(defs)
    assert spark.master == "local[1]"
    assert found.ledger_path == tmp_path / "given.duckdb"
    assert state.state_path(found) == tmp_path / "given-state.duckdb"


@pytest.mark.parametrize("value", ["0", "-1", "1.5", "soon"])
def test_a_bad_interval_is_refused_when_definitions_are_built_not_when_imported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv(SENSOR_INTERVAL_ENV, value)
    with pytest.raises(ValueError, match=f"^{SENSOR_INTERVAL_ENV} must be a whole number"):
        build_definitions([meters()])
    defs = build_definitions([meters()], sensor_interval=3)  # given: the variable is not read
    assert defs.resolve_sensor_def(sensor_name("meters")).minimum_interval_seconds == 2
