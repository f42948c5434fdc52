"""A DataFrame of rows the driver holds, made without Spark's Python workers.

PySpark's classic ``createDataFrame(rows, schema)`` hands a local list to the JVM as a Python
RDD: the first job over it starts Spark's Python worker processes (a daemon, and a worker per
core) and every job over it reads the rows back through them. From an Arrow table the rows are a
local relation in the JVM instead: a send of a few rows takes about half the time and CPU (on 2
cores, 63 ms against 132 ms a send, once warm).

The rows are checked first as ``createDataFrame`` checks them (PySpark's own verifier: the same
errors, word for word). A schema with a column whose Python values Arrow would read otherwise
than Spark (timestamps, which Spark takes as local time; dates, which it also takes from a
datetime; decimals, which it rounds; nested types) goes PySpark's own way, as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from pipelines.spark._internals import arrow_schema_of, row_verifier
from pipelines.spark.empty import empty_frame

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import DataType, StructType


def rows_frame(
    spark: SparkSession, rows: Sequence[tuple[Any, ...]], schema: StructType
) -> DataFrame:
    """``rows`` (tuples in ``schema``'s column order) as a DataFrame of ``schema`` (none:
    ``empty_frame``, whatever the schema)."""
    if not rows:
        return empty_frame(spark, schema)
    if not all(_same_in_arrow(field.dataType) for field in schema.fields):
        return spark.createDataFrame(list(rows), schema)
    verify = row_verifier(schema)
    for row in rows:
        verify(row)
    arrow = arrow_schema_of(schema)
    columns = list(zip(*rows, strict=True))
    table = pa.Table.from_arrays(
        [pa.array(values, type=field.type) for values, field in zip(columns, arrow, strict=True)],
        schema=arrow,
    )
    return spark.createDataFrame(table, schema)


def _same_in_arrow(data_type: DataType) -> bool:
    """Whether Arrow reads every Python value PySpark accepts for ``data_type`` as Spark does."""
    from pyspark.sql import types as T

    plain = (
        T.BooleanType,
        T.ByteType,
        T.ShortType,
        T.IntegerType,
        T.LongType,
        T.FloatType,
        T.DoubleType,
        T.StringType,
        T.BinaryType,
    )
    return isinstance(data_type, plain)
