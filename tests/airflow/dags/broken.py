"""A pipeline whose stage fails on an order without a region: the Airflow tests' failing run."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines import Pipeline

ORDERS = T.StructType(
    [T.StructField("order_id", T.LongType()), T.StructField("region", T.StringType())]
)


def checked(orders: DataFrame) -> DataFrame:
    """The orders, refused when one has no region."""
    missing = orders.where(F.col("region").isNull()).count()
    if missing:
        raise ValueError(f"{missing} order(s) without a region")
    return orders


pipeline = Pipeline("broken")
orders = pipeline.source("orders", schema=ORDERS, workers=1)
pipeline.transform("checked", orders, fn=checked)
