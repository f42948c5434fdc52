"""The bank example under Dagster, as the tests set it up: inputs, ledger, Definitions."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import dagster as dg
from pyspark.sql import SparkSession

from dagster_project.definitions import build_definitions
from dagster_project.resources import LedgerResource, SparkResource
from pipelines.examples import bank
from pipelines.examples.bank_data import DemoData, generate
from pipelines.run.runtime import Runtime
from pipelines.stages.pipeline import Pipeline
from tests.dagster_project.driver import Driver

HELD = ("card_payments", bank.WORKERS["card_payments"] - 1)
"""The card worker whose late file holds an epoch open."""


def local_definitions(pipeline: Pipeline, ledger: LedgerResource) -> dg.Definitions:
    """Definitions of ``pipeline`` on ``ledger``, their runs in the session the tests share
    (already active: the resource uses it as it is)."""
    spark = SparkResource(master="local[2]", conf={"spark.sql.shuffle.partitions": "2"})
    return build_definitions([pipeline], spark=spark, ledger=ledger)


@dataclass
class Bank:
    """The bank example under Dagster: its inputs, ledger, Definitions, a driver and the
    Runtime the sources send through (the way an ingestion process would)."""

    data: DemoData
    ledger: LedgerResource
    defs: dg.Definitions
    drive: Driver
    spark: SparkSession

    @classmethod
    def create(cls, root: Path, spark: SparkSession, instance: dg.DagsterInstance) -> Bank:
        """Two small epochs of bank inputs in ``root/inputs`` (written again if they are there
        already: the same seed writes the same files), the ledger ``root/home/ledger.duckdb``
        (empty unless it is there already) and Definitions that use them."""
        data = generate(root / "inputs", epochs=2, rows=200, accounts=20, seed=5)
        ledger = LedgerResource(path=str(root / "home" / "ledger.duckdb"))
        defs = local_definitions(bank.pipeline(), ledger)
        return cls(data, ledger, defs, Driver(defs, instance), spark)

    @cached_property
    def rt(self) -> Runtime:
        """The sources' side (created on first use: it registers the pipeline in the ledger)."""
        return Runtime(bank.pipeline(), self.ledger.ledger(), self.spark, self.ledger.data_root)

    def send_epoch(self, epoch: int, *, hold: bool = False, bad_accounts: bool = False) -> None:
        """Every worker sends its files for ``epoch`` and advances past it; with ``hold``, the
        held worker sends only its first file and keeps the epoch open; with ``bad_accounts``,
        the accounts worker sends a file with regions missing."""
        for source, workers in bank.WORKERS.items():
            for w in range(workers):
                files = self.data.files(source, epoch, w)
                if source == "accounts" and bad_accounts:
                    files = [self.data.without_regions()]
                if hold and (source, w) == HELD:
                    self.rt.input(source, w).send(files[0])
                    continue
                for path in files:
                    self.rt.input(source, w).send(path)
                self.rt.input(source, w).advance_to(epoch + 1)

    def release(self, epoch: int) -> None:
        """The held worker sends its late file for ``epoch`` and advances past it."""
        source, w = HELD
        self.rt.input(source, w).send(self.data.files(source, epoch, w)[-1])
        self.rt.input(source, w).advance_to(epoch + 1)

    def close_inputs(self) -> None:
        for source, workers in bank.WORKERS.items():
            for w in range(workers):
                self.rt.input(source, w).close()
