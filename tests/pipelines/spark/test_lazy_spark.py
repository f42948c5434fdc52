"""A Spark session started on first use: once, and shared by everything that holds it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pipelines.run.runtime import Runtime
from pipelines.spark.session import LazySpark
from progress.ledger import Ledger
from tests.fixtures.clicks import pipeline, write_clicks

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark


def test_the_factory_is_called_once_on_first_use(spark: SparkSession) -> None:
    calls: list[int] = []

    def start() -> SparkSession:
        calls.append(1)
        return spark

    lazy = LazySpark(start)
    assert LazySpark.of(lazy) is lazy
    assert not lazy.started
    assert lazy.session() is lazy.session() is spark
    assert (lazy.started, len(calls)) == (True, 1)
    given = LazySpark(spark)
    assert given.started
    assert given.session() is spark


def test_a_runtime_starts_spark_when_a_stage_runs(spark: SparkSession, tmp_path: Path) -> None:
    calls: list[int] = []

    def start() -> SparkSession:
        calls.append(1)
        return spark

    rt = Runtime(pipeline(), Ledger(tmp_path / "ledger.duckdb"), start, tmp_path / "data")
    for worker in (0, 1):
        file = write_clicks(tmp_path / f"{worker}.parquet", [(worker, "a")])
        rt.input("clicks", worker).send(file)
        assert rt.run() == []  # epoch 0 is not complete yet
        rt.input("clicks", worker).close()
    assert calls == []
    (result,) = rt.run()
    assert (result.stage, result.rows, len(calls)) == ("per_page", 1, 1)
    assert rt.read("per_page", 0).collect()[0]["count"] == 2
    assert len(calls) == 1
