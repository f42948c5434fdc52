"""Fixtures of the Dagster tests: a real ephemeral instance, bank inputs and bank Definitions."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest
from pyspark.sql import SparkSession

from dagster_project.definitions import build_definitions
from dagster_project.resources import LedgerResource, SparkResource
from pipelines.examples import bank
from pipelines.examples.bank_data import generate
from tests.dagster_project.driver import Driver
from tests.dagster_project.scenario import Bank


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.instance_for_test() as instance:
        yield instance


@pytest.fixture
def bank_home(tmp_path: Path, spark: SparkSession, instance: dg.DagsterInstance) -> Bank:
    """Two small epochs of bank inputs, an empty ledger and Definitions that use them."""
    data = generate(tmp_path / "inputs", epochs=2, rows=200, accounts=20, seed=5)
    ledger = LedgerResource(path=str(tmp_path / "home" / "ledger.duckdb"))
    defs = build_definitions(
        [bank.pipeline()],
        # The session the tests share is already active: the resource uses it as it is.
        spark=SparkResource(master="local[2]", conf={"spark.sql.shuffle.partitions": "2"}),
        ledger=ledger,
    )
    return Bank(data, ledger, defs, Driver(defs, instance), spark)
