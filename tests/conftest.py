"""Session-wide fixtures: one local SparkSession for every Spark test; the slow test files first."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    from pipelines.spark.session import spark_session

    session = spark_session(
        "local[2]", {"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"}
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The files marked ``slow`` first (in their order), then the others: with the suite spread
    over two processes a file at a time (``make test``), the long files start early and the two
    processes end together instead of one waiting on a long file collected last."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
