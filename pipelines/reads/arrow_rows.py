"""A committed output's Parquet files read into Arrow in this process, with no Spark job.

``Runtime.read_arrow`` gives the rows ``Runtime.read`` gives, as a ``pyarrow.Table`` typed as
PySpark's ``DataFrame.toArrow()`` types them (timestamps in UTC): a report, a notebook or a
test reads a final epoch without a JVM or a Spark Connect server. Spark reads
the files with the stage's columns, by name; so does this (``table``). Where pyarrow cannot
give what Spark would (a file without one of the columns, a type Spark converts on read, no
columns known), ``table`` says so by returning None and the caller reads through Spark.
``collected_rows`` gives a table's rows with the Python values ``DataFrame.collect()`` gives.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from pipelines.spark._internals import arrow_schema_of
from pipelines.spark.footers import parts

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType


def arrow_schema(schema: StructType) -> pa.Schema:
    """The Arrow schema PySpark's ``toArrow()`` gives a frame Spark read with ``schema``: in
    UTC, and every column nullable (Spark's file reads make every column so)."""
    return pa.schema([_nullable(field) for field in arrow_schema_of(schema)])


def _nullable(field: pa.Field) -> pa.Field:
    """``field`` nullable, and every field within it (Spark's ``asNullable``)."""
    kind = field.type
    if pa.types.is_struct(kind):
        kind = pa.struct([_nullable(f) for f in kind])
    elif pa.types.is_map(kind):
        item = _nullable(kind.item_field)
        kind = pa.map_(kind.key_field, item)
    elif pa.types.is_list(kind):
        kind = pa.list_(_nullable(kind.value_field))
    elif pa.types.is_large_list(kind):
        kind = pa.large_list(_nullable(kind.value_field))
    return field.with_type(kind).with_nullable(True)


def table(paths: Sequence[str], schema: StructType) -> pa.Table | None:
    """The rows of the Parquet files of ``paths`` (message files or data directories) with the
    columns of ``schema``, or None when a file lacks one of them or holds it as a type that
    does not cast to the column's (Spark, not this, must read those)."""
    target = arrow_schema(schema)
    pieces: list[pa.Table] = []
    for path in paths:
        for part in parts(path):
            file = pq.ParquetFile(part)
            if not set(target.names) <= set(file.schema_arrow.names):
                return None
            read = file.read(columns=target.names, use_threads=False)
            try:
                pieces.append(read.select(target.names).cast(target))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                return None
    if not pieces:
        return target.empty_table()
    return pa.concat_tables(pieces)


def from_frame(frame: DataFrame) -> pa.Table:
    """``frame``'s rows through Spark, typed as ``table`` types them (timestamps in UTC)."""
    read = frame.toArrow()
    return read.cast(arrow_schema(frame.schema))


def collected_rows(table: pa.Table, columns: Sequence[str]) -> list[tuple[Any, ...]]:
    """``table``'s rows of ``columns`` with the values PySpark's ``collect()`` gives: a struct
    as a tuple, a map as a dict, a timestamp as a naive ``datetime`` in local time."""
    picked = [
        [collected(v, table.schema.field(name).type) for v in table.column(name).to_pylist()]
        for name in columns
    ]
    return list(zip(*picked, strict=True))


def collected(value: Any, kind: pa.DataType) -> Any:
    """One Arrow value of type ``kind`` as ``collect()`` gives it (see ``collected_rows``)."""
    if value is None:
        return None
    if pa.types.is_timestamp(kind) and isinstance(value, datetime) and value.tzinfo is not None:
        return value.astimezone().replace(tzinfo=None)
    if pa.types.is_struct(kind):
        return tuple(collected(value[f.name], f.type) for f in kind)
    if pa.types.is_map(kind):
        return {collected(k, kind.key_type): collected(v, kind.item_type) for k, v in value}
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return [collected(v, kind.value_type) for v in value]
    return value
