"""``clicks``: the smallest pipeline the command-line tests load as ``module:attribute``.

``clicks`` (2 workers) → ``per_page`` (clicks per page and epoch). ``broken`` is the same with
a stage that selects a column its input does not have.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql.types import LongType, StringType, StructField, StructType

from pipelines.dataflow import Pipeline

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

CLICKS = StructType([StructField("click_id", LongType()), StructField("page", StringType())])
REFERENCE = "tests.pipelines.clicks:pipeline"
BROKEN = "tests.pipelines.clicks:broken"


def per_page(df: DataFrame) -> DataFrame:
    return df.groupBy("page").count()


def pipeline() -> Pipeline:
    p = Pipeline("clicks")
    clicks = p.source("clicks", schema=CLICKS, workers=2, key=["click_id"])
    p.transform("per_page", clicks, fn=per_page)
    return p


def broken() -> Pipeline:
    p = Pipeline("broken")
    clicks = p.source("clicks", schema=CLICKS, key=["click_id"])
    p.transform("pick", clicks, fn=lambda df: df.select("no_such_column"))
    return p


def write_clicks(path: Path, rows: list[tuple[int, str]]) -> Path:
    """A Parquet file of clicks that passes the pyarrow check (copied as it is on send)."""
    table = pa.table(
        {
            "click_id": pa.array([r[0] for r in rows], pa.int64()),
            "page": pa.array([r[1] for r in rows], pa.string()),
        }
    )
    pq.write_table(table, path)
    return path


def write_mistyped(path: Path) -> Path:
    """A file whose ``click_id`` is a string: the pyarrow check refuses it."""
    pq.write_table(pa.table({"click_id": ["1"], "page": ["home"]}), path)
    return path
