"""Checking a Parquet file against a source's schema without Spark.

A single file whose column types map plainly to Spark's is read whole with pyarrow (so a
corrupt page is found now, not in a later stage) and checked for missing, extra and mistyped
columns and null keys. When it fits and its columns are in the schema's order, the file can be
copied byte for byte into the attempt directory. Anything this check cannot judge (a
directory, a type it does not map, another column order) is left to Spark.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from pipelines.errors import InputValidationError
from pipelines.run.schema_check import check_columns
from progress import Time

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

SPARK_TYPE_OF_ARROW = {
    "int8": "tinyint",
    "int16": "smallint",
    "int32": "int",
    "int64": "bigint",
    "float": "float",
    "double": "double",
    "string": "string",
    "large_string": "string",
    "bool": "boolean",
    "binary": "binary",
    "date32[day]": "date",
}


def check_file(
    stage: str,
    epoch: Time,
    path: Path,
    schema: StructType,
    key: tuple[str, ...],
    *,
    name: str | None = None,
) -> pa.Table | None:
    """The file's rows if it fits ``schema`` and can be copied as is (or written sorted:
    ``pipelines.run.layout``); ``None`` if Spark must judge it. Raises ``InputValidationError``
    naming the column and the file (``name``, default ``path``: the file the user gave when
    ``path`` is a copy of it) when it does not fit."""
    if not path.is_file():
        return None
    file = name or str(path)
    try:
        table = pq.read_table(path)
    except Exception as err:
        said = str(err).strip().replace(str(path), file)  # the file given, not its copy
        msg = f"cannot read Parquet: {(said.splitlines() or [type(err).__name__])[0][:300]}"
        raise InputValidationError(stage, epoch, msg, file=file) from err
    mapped = {f.name: SPARK_TYPE_OF_ARROW.get(str(f.type)) for f in table.schema}
    have = {name: t for name, t in mapped.items() if t is not None}
    if len(have) != len(mapped):
        return None
    check_columns(stage, epoch, have, schema, file)
    for column in key:
        if table.column(column).null_count:
            raise InputValidationError(stage, epoch, "null key", file=file, column=column)
    if table.schema.names != schema.fieldNames():
        return None
    return table
