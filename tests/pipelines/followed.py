"""A pipeline that follows another one's capture from its own ledger, for the ``--follow``
tests: its replayed source reads the capture directories ``$EPOCHGATE_TEST_FOLLOWED`` lists
(``valid_cards`` of a ``bank``), and one stage totals the card debits per merchant category."""

from __future__ import annotations

import os

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pipelines.dataflow import Pipeline

FOLLOWED_ENV = "EPOCHGATE_TEST_FOLLOWED"
REF = "tests.pipelines.followed:pipeline"
NAME = "follower"


def card_totals(df: DataFrame) -> DataFrame:
    """Per merchant category, the sum of the debits and how many there were."""
    return df.groupBy("category").agg(
        F.sum("amount_cents").alias("total_cents"), F.count("*").alias("movements")
    )


def pipeline() -> Pipeline:
    p = Pipeline(NAME)
    cards = p.replay("valid_cards", os.environ[FOLLOWED_ENV].split(os.pathsep), workers=1)
    p.transform("card_totals", cards, fn=card_totals)
    return p
