"""A written message with no rows still has one Parquet file, which carries its schema.

Spark writes one file for an empty DataFrame (its schema in the footer); Sail writes none, not
even the directory. Everything that reads a message by its files needs one: the footers that
give a message's schema without a Spark job, DuckDB's ``DIR/*.parquet`` globs (the state store,
upqueries), and a Spark read of the directory. ``fill_empty`` runs after every write of a
message: on Spark it finds the file and does nothing; where none was written, it writes an
empty one with the DataFrame's schema, Spark's schema key in its footer as Spark's writer puts
it.

``empty_frame`` is a DataFrame with no rows made from Arrow: PySpark's classic
``createDataFrame([], schema)`` reads its (no) rows through a Python RDD, and a job over it starts
Spark's Python worker processes (a daemon and a worker per core) in a session that needed none.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from pipelines.spark._internals import arrow_schema_of
from pipelines.spark.footers import SPARK_SCHEMA_KEY, parts

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

EMPTY_PART = "part-00000-empty.parquet"
"""The name of the file written for a message that has no rows."""


def fill_empty(path: str | Path, df: DataFrame) -> None:
    """Give the directory ``path`` one empty Parquet file with ``df``'s schema when the write
    of ``df`` to it left no Parquet file (see the module docs)."""
    if parts(path):
        return
    write_empty(Path(path), df.schema)


def write_empty(path: Path, schema: StructType) -> Path:
    """Write ``path/EMPTY_PART``: no rows, ``schema``'s columns. Returns the file."""
    arrow = arrow_schema_of(schema).with_metadata({SPARK_SCHEMA_KEY: schema.json().encode()})
    path.mkdir(parents=True, exist_ok=True)
    target = path / EMPTY_PART
    pq.write_table(pa.Table.from_batches([], schema=arrow), target)
    return target


def empty_frame(spark: SparkSession, schema: StructType) -> DataFrame:
    """No rows, ``schema``'s columns (see the module docs)."""
    return spark.createDataFrame(arrow_schema_of(schema).empty_table(), schema)
