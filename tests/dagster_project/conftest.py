"""Fixtures of the Dagster tests: a real ephemeral instance, bank inputs and bank Definitions;
and one Dagster UI (``dagster-webserver`` and its instance directory) for the browser tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest
from pyspark.sql import SparkSession

from tests.dagster_project.browser import chromium_path, serve, ui_instance
from tests.dagster_project.dagster_dev import DagsterDev
from tests.dagster_project.scenario import Bank


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.instance_for_test() as instance:
        yield instance


@pytest.fixture
def bank_home(tmp_path: Path, spark: SparkSession, instance: dg.DagsterInstance) -> Bank:
    """Two small epochs of bank inputs, an empty ledger and Definitions that use them."""
    return Bank.create(tmp_path, spark, instance)


@pytest.fixture(scope="package")
def ui_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the Dagster UI of the browser tests works, its instance in ``dagster/``."""
    return tmp_path_factory.mktemp("ui")


@pytest.fixture(scope="package")
def ui_home(ui_root: Path) -> Path:
    """The Dagster instance directory the UI of the browser tests serves: a test writes runs
    to it (``dg.DagsterInstance.from_config``) to see them in the UI."""
    return ui_instance(ui_root)


@pytest.fixture(scope="package")
def webserver(ui_root: Path, ui_home: Path) -> Iterator[DagsterDev]:
    """``dagster-webserver`` on the project's workspace and ``ui_home``: started once for the
    browser tests of this package (about 5 s)."""
    with serve(ui_root, ui_home) as dev:
        yield dev


@pytest.fixture(scope="package")
def chromium_executable() -> str:
    return chromium_path()
