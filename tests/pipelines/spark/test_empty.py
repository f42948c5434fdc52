"""An empty DataFrame of any schema, made from Arrow: a local relation, so no job over it starts
Spark's Python workers."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import types as T

from pipelines.spark.empty import empty_frame

pytestmark = pytest.mark.spark

SCHEMA = T.StructType(
    [
        T.StructField("id", T.LongType(), nullable=False),
        T.StructField("name", T.StringType()),
        T.StructField("amount", T.DecimalType(12, 2)),
        T.StructField("day", T.DateType()),
        T.StructField("at", T.TimestampType()),
        T.StructField("local", T.TimestampNTZType()),
        T.StructField("tags", T.ArrayType(T.StringType())),
        T.StructField("place", T.StructType([T.StructField("x", T.IntegerType())])),
        T.StructField("counts", T.MapType(T.StringType(), T.LongType())),
        T.StructField("raw", T.BinaryType()),
    ]
)


def test_an_empty_frame_has_the_schema_and_is_a_local_relation(spark: SparkSession) -> None:
    empty = empty_frame(spark, SCHEMA)
    assert empty.schema == SCHEMA
    assert empty.count() == 0
    assert empty.toArrow().num_rows == 0
    # createDataFrame([], schema) plans a LogicalRDD over a Python RDD instead.
    assert empty._jdf.queryExecution().logical().nodeName() == "LocalRelation"
