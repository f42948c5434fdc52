"""The pipeline of the Airflow how-to: orders from two input workers, totalled by region per
epoch. Airflow puts its DAG folder on the path, so its tasks find it as ``shop:pipeline``."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines import Pipeline

ORDERS = T.StructType(
    [
        T.StructField("order_id", T.LongType()),
        T.StructField("region", T.StringType()),
        T.StructField("amount", T.DoubleType()),
    ]
)


def totals(orders: DataFrame) -> DataFrame:
    """Each region's total and number of orders in the epoch."""
    return orders.groupBy("region").agg(
        F.sum("amount").alias("total"), F.count("*").alias("orders")
    )


pipeline = Pipeline("shop")
orders = pipeline.source("orders", schema=ORDERS, workers=2)
pipeline.transform("by_region", orders, fn=totals)
