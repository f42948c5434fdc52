"""A DataFrame's checksum: the same rows give the same sum, whatever their order or files; a
changed row changes it; observed while a DataFrame is written, it equals the files' own."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines.spark.checksum import checksum, observed

pytestmark = pytest.mark.spark

SCHEMA = T.StructType(
    [
        T.StructField("id", T.LongType()),
        T.StructField("who.name", T.StringType()),  # a dot in a column's own name
        T.StructField("cents", T.DecimalType(12, 2)),
        T.StructField("at", T.TimestampType()),
    ]
)
ROWS = [
    (1, "O'Neil", Decimal("2.50"), datetime(2024, 1, 1, 12, tzinfo=UTC)),
    (2, None, Decimal("-7.25"), None),
    (3, 'the "Best" Co', None, datetime(2024, 2, 29, tzinfo=UTC)),
    (3, 'the "Best" Co', None, datetime(2024, 2, 29, tzinfo=UTC)),  # a row twice counts twice
]


def test_the_checksum_of_rows_is_the_same_in_any_order_and_files(spark: SparkSession) -> None:
    df = spark.createDataFrame(ROWS, SCHEMA)
    total = checksum(df)
    assert checksum(df.orderBy(F.col("id").desc()).repartition(3)) == total
    assert checksum(spark.createDataFrame(ROWS[:3], SCHEMA)) != total
    changed = [(1, "O'Neil", Decimal("2.51"), ROWS[0][3]), *ROWS[1:]]
    assert checksum(spark.createDataFrame(changed, SCHEMA)) != total
    assert checksum(spark.createDataFrame([], SCHEMA)) == 0


def test_a_checksum_observed_while_written_equals_the_written_files(
    spark: SparkSession, tmp_path: Path
) -> None:
    df = spark.createDataFrame(ROWS, SCHEMA)
    watched, value = observed(df)
    watched.write.parquet(str(tmp_path / "rows"))
    written = spark.read.schema(SCHEMA).parquet(str(tmp_path / "rows"))
    assert value() == checksum(written) == checksum(df)

    watched, value = observed(spark.createDataFrame([], SCHEMA))
    watched.write.parquet(str(tmp_path / "none"))
    assert value() == 0
