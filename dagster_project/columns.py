"""A stage's columns as Dagster shows them (``dagster/column_schema``): from a declared Spark
schema, or from the Parquet footer of a committed message (no Spark job)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import dagster as dg
import pyarrow as pa
import pyarrow.parquet as pq

from pipelines.run.file_inputs import NanosecondsError, spark_type

if TYPE_CHECKING:
    from pyspark.sql.types import StructType


def spark_table_schema(schema: StructType) -> dg.TableSchema:
    """Each field of a Spark schema as a column with its Spark type name."""
    return dg.TableSchema(
        columns=[
            dg.TableColumn(
                f.name,
                f.dataType.simpleString(),
                constraints=None if f.nullable else dg.TableColumnConstraints(nullable=False),
            )
            for f in schema.fields
        ]
    )


def parquet_table_schema(directory: str | Path) -> dg.TableSchema | None:
    """The columns of the Parquet files in a message's directory, with Spark type names where
    they map plainly (else Arrow's); ``None`` when it holds no file."""
    parts = sorted(Path(directory).glob("*.parquet"))
    if not parts:
        return None
    arrow = pq.read_schema(parts[0])
    return dg.TableSchema(columns=[dg.TableColumn(f.name, _type_name(f.type)) for f in arrow])


def _type_name(t: pa.DataType) -> str:
    try:
        return spark_type(t) or str(t)
    except NanosecondsError:
        return str(t)
