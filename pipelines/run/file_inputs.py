"""Checking a Parquet file against a source's schema without Spark.

A single file whose column types map to Spark's is read whole with pyarrow (so a corrupt page
is found now, not in a later stage) and checked for missing, extra and mistyped columns and
null keys. When it fits and its columns are in the schema's order, the file can be copied byte
for byte into the attempt directory. Anything this check cannot judge (a directory, a type it
does not map, another column order) is left to Spark.

The types it maps are those Spark reads the same way (``spark_type``): integers (unsigned ones
as Spark widens them), floats, strings, binaries, booleans, dates, decimals up to 38 digits,
timestamps in milliseconds or microseconds (with a time zone: ``timestamp``; without:
``timestamp_ntz``), and lists, structs and maps of those. A timestamp in nanoseconds is refused
here, naming its column: Spark cannot read it.
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
    "uint8": "smallint",
    "uint16": "int",
    "uint32": "bigint",
    "uint64": "decimal(20,0)",
    "float": "float",
    "double": "double",
    "string": "string",
    "large_string": "string",
    "bool": "boolean",
    "binary": "binary",
    "large_binary": "binary",
    "date32[day]": "date",
}
"""Plain Arrow types, by name, as Spark's ``simpleString`` of the type it reads them as."""

NANOSECONDS = (
    "a timestamp in nanoseconds, which Spark cannot read: write it in microseconds "
    "(pyarrow: coerce_timestamps='us')"
)


class NanosecondsError(ValueError):
    """A column holds timestamps in nanoseconds."""


def spark_type(t: pa.DataType) -> str | None:
    """The ``simpleString`` of the Spark type a Parquet column of Arrow type ``t`` is read as,
    or None when this check does not judge it (Spark does). Raises ``NanosecondsError`` for a
    timestamp Spark cannot read."""
    if pa.types.is_timestamp(t):
        if t.unit == "ns":
            raise NanosecondsError(NANOSECONDS)
        return "timestamp" if t.tz is not None else "timestamp_ntz"
    if pa.types.is_decimal128(t):
        return f"decimal({t.precision},{t.scale})"
    if pa.types.is_fixed_size_binary(t):
        return "binary"
    if pa.types.is_dictionary(t):
        return spark_type(t.value_type)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        item = spark_type(t.value_type)
        return None if item is None else f"array<{item}>"
    if pa.types.is_map(t):
        key, item = spark_type(t.key_type), spark_type(t.item_type)
        return None if key is None or item is None else f"map<{key},{item}>"
    if pa.types.is_struct(t):
        fields = [(t.field(i).name, spark_type(t.field(i).type)) for i in range(t.num_fields)]
        if any(kind is None or not name.isidentifier() for name, kind in fields):
            return None
        return f"struct<{','.join(f'{name}:{kind}' for name, kind in fields)}>"
    return SPARK_TYPE_OF_ARROW.get(str(t))


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
        with pq.ParquetFile(path) as parquet:
            table = parquet.read()  # every page read: a damaged file is refused here
    except Exception as err:
        said = str(err).strip().replace(str(path), file)  # the file given, not its copy
        msg = f"cannot read Parquet: {(said.splitlines() or [type(err).__name__])[0][:300]}"
        raise InputValidationError(stage, epoch, msg, file=file) from err
    mapped: dict[str, str | None] = {}
    for f in table.schema:
        try:
            mapped[f.name] = spark_type(f.type)
        except NanosecondsError as err:
            raise InputValidationError(stage, epoch, str(err), file=file, column=f.name) from err
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
