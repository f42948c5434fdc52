"""A pipeline of a user's own, not the bundled example: meter readings from two workers, the
valid ones, the same a day late (``delay=1``), both days together, and a running total per
meter that keeps only the meters that are read (partial: an upquery job and sensor)."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines.stages.pipeline import Pipeline

READINGS = T.StructType(
    [T.StructField("meter", T.StringType()), T.StructField("kwh", T.DoubleType())]
)
DELAY = 1


def valid(df: DataFrame) -> DataFrame:
    """Readings that are not negative."""
    return df.where(F.col("kwh") >= 0)


def yesterday(df: DataFrame) -> DataFrame:
    """The valid readings again, one epoch later."""
    return df


def meters() -> Pipeline:
    p = Pipeline("meters")
    readings = p.source("readings", schema=READINGS, workers=2, key=["meter"])
    checked = p.transform("valid", readings, fn=valid)
    late = p.transform("yesterday", checked, fn=yesterday, delay=DELAY)
    both = p.union("both_days", checked, late)
    p.aggregate("totals", both, key=["meter"], aggs={"kwh": ("sum", "kwh")}, partial=True)
    return p
