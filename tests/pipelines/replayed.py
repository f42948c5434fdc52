"""A pipeline with a replayed source, for the command line's tests: its captures are the
directories ``$EPOCHGATE_TEST_CAPTURES`` lists, and ``$EPOCHGATE_TEST_PLANTED`` plants a change
in its stage's function (what ``epochgate replay --diff`` must report)."""

from __future__ import annotations

import os

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pipelines.dataflow import Pipeline

CAPTURES_ENV = "EPOCHGATE_TEST_CAPTURES"
PLANTED_ENV = "EPOCHGATE_TEST_PLANTED"
REF = "tests.pipelines.replayed:pipeline"


def totals(df: DataFrame) -> DataFrame:
    """Per account, the sum of its amounts (with the planted change: one account's is off)."""
    out = df.groupBy("account").agg(F.sum("amount").alias("amount"))
    if os.environ.get(PLANTED_ENV):
        out = out.withColumn(
            "amount",
            F.when(F.col("account") == "a1", F.col("amount") + 1).otherwise(F.col("amount")),
        )
    return out


def pipeline() -> Pipeline:
    p = Pipeline("replayed")
    payments = p.replay("payments", os.environ[CAPTURES_ENV].split(os.pathsep), workers=2)
    p.transform("totals", payments, fn=totals)
    return p
