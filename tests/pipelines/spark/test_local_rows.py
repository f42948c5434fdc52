"""Rows the driver holds, as a DataFrame from Arrow: the same rows and the same errors as
PySpark's ``createDataFrame``, as a local relation (no Python workers) where the schema allows."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.errors import PySparkTypeError, PySparkValueError
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from pipelines.spark.local_rows import rows_frame

pytestmark = pytest.mark.spark

PLAIN = T.StructType(
    [
        T.StructField("id", T.LongType(), nullable=False),
        T.StructField("small", T.ByteType()),
        T.StructField("short", T.ShortType()),
        T.StructField("int", T.IntegerType()),
        T.StructField("ratio", T.FloatType()),
        T.StructField("amount", T.DoubleType()),
        T.StructField("name", T.StringType()),
        T.StructField("flag", T.BooleanType()),
        T.StructField("raw", T.BinaryType()),
    ]
)

REFUSED = (PySparkTypeError, PySparkValueError)


def _ints(bits: int) -> st.SearchStrategy[int | None]:
    return st.none() | st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)


ROWS = st.lists(
    st.tuples(
        st.integers(-(2**63), 2**63 - 1),
        _ints(8),
        _ints(16),
        _ints(32),
        st.none() | st.floats(width=32),
        st.none() | st.floats(),
        st.none() | st.text(max_size=8),
        st.none() | st.booleans(),
        st.none() | st.binary(max_size=8),
    ),
    max_size=60,
)


def shown(df: DataFrame) -> list[str]:
    """Each row's repr, in order: NaN equals NaN there, and -0.0 differs from 0.0."""
    return [repr(row) for row in df.orderBy("id").collect()]


def plan(df: DataFrame) -> str:
    name: str = df._jdf.queryExecution().logical().nodeName()
    return name


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=ROWS)
def test_plain_rows_equal_pysparks_own_frame_and_are_a_local_relation(
    spark: SparkSession, rows: list[tuple[Any, ...]]
) -> None:
    rows = list({row[0]: row for row in rows}.values())  # one row per id: a total order
    made = rows_frame(spark, rows, PLAIN)
    assert made.schema == PLAIN
    assert plan(made) == "LocalRelation"
    assert shown(made) == shown(spark.createDataFrame(rows, PLAIN))


@pytest.mark.parametrize(
    "row",
    [
        (None, 1, 1, 1, 1.0, 1.0, "a", True, b""),  # a null in a column that allows none
        (1, 1, 1, 1, 1.0, 1, "a", True, b""),  # an int for a double
        (1, 300, 1, 1, 1.0, 1.0, "a", True, b""),  # beyond a byte
        (1, 1, 1, True, 1.0, 1.0, "a", True, b""),  # a bool for an int
        (1, 1, 1, 1, 1.0, 1.0, "a", True),  # a column short
    ],
)
def test_a_bad_row_is_refused_with_pysparks_own_error(
    spark: SparkSession, row: tuple[Any, ...]
) -> None:
    with pytest.raises(REFUSED) as theirs:
        spark.createDataFrame([row], PLAIN)
    with pytest.raises(REFUSED) as ours:
        rows_frame(spark, [(1, None, None, None, None, None, None, None, None), row], PLAIN)
    assert (type(ours.value), str(ours.value)) == (type(theirs.value), str(theirs.value))


def test_a_column_arrow_would_read_otherwise_goes_pysparks_own_way(spark: SparkSession) -> None:
    schema = T.StructType(
        [
            T.StructField("id", T.LongType()),
            T.StructField("at", T.TimestampType()),
            T.StructField("day", T.DateType()),
        ]
    )
    rows = [(1, dt.datetime(2026, 3, 1, 12, 30), dt.datetime(2026, 3, 2, 23, 59))]
    made = rows_frame(spark, rows, schema)
    assert plan(made) != "LocalRelation"
    assert shown(made) == shown(spark.createDataFrame(rows, schema))
