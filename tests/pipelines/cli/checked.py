"""Pipelines ``epochgate check`` is tried on: ``sound`` passes every check; ``flawed`` defines
without an error but breaks five rules that only its columns over empty inputs, or its sinks
taken together, show."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

from pipelines import PartialState, Pipeline

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

SOUND = "tests.pipelines.cli.checked:sound"
FLAWED = "tests.pipelines.cli.checked:flawed"

ORDERS = StructType(
    [
        StructField("order_id", LongType()),
        StructField("customer", StringType()),
        StructField("amount", DoubleType()),
    ]
)
CUSTOMERS = StructType([StructField("customer", StringType()), StructField("region", StringType())])
TOTALS = StructType([StructField("customer", StringType()), StructField("total", DoubleType())])


def kept(orders: DataFrame) -> DataFrame:
    return orders.where(F.col("amount") > 0)


def sound() -> Pipeline:
    p = Pipeline("sound")
    orders = p.source("orders", schema=ORDERS, workers=2, key=["order_id"])
    customers = p.dimension("customers", schema=CUSTOMERS, key=["customer"])
    valid = p.transform("valid", orders, fn=kept)
    named = p.join("named", valid, customers, on=["customer"], how="left")
    regions = p.aggregate("regions", named, key=["region"], aggs={"total": ("sum", "amount")})
    p.aggregate(
        "per_customer",
        valid,
        key=["customer"],
        aggs={"orders": ("count", None)},
        partial=PartialState(max_keys=100),
    )
    p.transform("later", valid, fn=kept, delay=1)
    p.sink("export", regions, path="out/regions")
    return p


def wrong_update(batch: DataFrame, state: DataFrame) -> DataFrame:
    return batch.select("customer")  # the state's column `total` is missing


def flawed() -> Pipeline:
    p = Pipeline("flawed")
    orders = p.source("orders", schema=ORDERS, key=["order_id"])
    p.transform("broken", orders, fn=lambda df: df.select("no_such_column"))
    dropped = p.transform("dropped", orders, fn=lambda df: df.drop("customer"))
    p.aggregate("per_customer", dropped, key=["customer"], aggs={"n": ("count", None)})
    p.stateful("running", orders, key=["customer"], schema=TOTALS, update=wrong_update)
    p.join("joined", dropped, orders, on=["customer"])
    p.sink("first", orders, path="out/same")
    p.sink("second", dropped, path="out/same")
    return p
