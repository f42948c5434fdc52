"""What the Parquet footers of a written message tell without a Spark job: its Spark schema,
whether a column holds a null, how many rows it has.

Spark writes a DataFrame's schema into each file's footer (the key ``SPARK_SCHEMA_KEY``) and a
null count per column chunk. Reading a message with ``spark.read.parquet(path)`` and no schema
costs one Spark job that opens a footer to infer it (measured on 2 busy cores: 0.1-0.3 s per
read at any size, paid by every stage run for each input that declares no columns); the same
footer read with pyarrow takes about a millisecond. Likewise a check for null keys that would
run a ``limit(1)`` job over the input (0.3-0.5 s at 2,000 rows) is answered by the null counts
when every file has them. Spark applies ``asNullable`` to any schema given to a file read, so a
read with the footer's schema gives the very columns inference gives.

A message's files are never rewritten, so their footers are read once where several checks of
one message ask (``Footers``: a send's checks of what it wrote, an upquery's files).
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow.parquet as pq

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

SPARK_SCHEMA_KEY = b"org.apache.spark.sql.parquet.row.metadata"
"""The footer key under which Spark's Parquet writer keeps the schema of the rows, as JSON."""


HIDDEN = ("_", ".")
"""How the names of the files Spark skips in a directory it reads start."""

FOOTERS_KEPT = 4_096
"""Footers one ``Footers`` keeps (the least recently used go first)."""


class Footers:
    """Parquet footers by file path, each read once: message files are never rewritten (give it
    only such files)."""

    def __init__(self, kept: int = FOOTERS_KEPT) -> None:
        self.kept = kept
        self._by_path: OrderedDict[str, pq.FileMetaData] = OrderedDict()

    def get(self, path: str) -> pq.FileMetaData:
        found = self._by_path.get(path)
        if found is None:
            found = pq.read_metadata(path)
            self._by_path[path] = found
            while len(self._by_path) > self.kept:
                self._by_path.popitem(last=False)
        else:
            self._by_path.move_to_end(path)
        return found


def parts(path: str | Path) -> list[Path]:
    """The Parquet files of a message's data directory (or the file itself), in name order:
    those Spark reads from the directory (a name starting with ``_`` or ``.`` is hidden)."""
    p = Path(path)
    if p.is_file():
        return [p]
    return sorted(f for f in p.glob("*.parquet") if not f.name.startswith(HIDDEN))


def spark_schema(paths: Sequence[str | Path]) -> StructType | None:
    """The Spark schema in the footer of the first Parquet file of ``paths`` (what Spark infers
    when it reads them without one), or None when that file was not written by Spark or there
    is no file. Like Spark's own inference, only the first file is looked at."""
    from pyspark.sql.types import StructType

    for path in paths:
        for part in parts(path):
            try:
                found = pq.read_metadata(part).metadata or {}
            except OSError:
                return None
            text = found.get(SPARK_SCHEMA_KEY)
            if text is None:
                return None
            return StructType.fromJson(json.loads(text))
    return None


def one_file_schema(paths: Sequence[str | Path]) -> bool:
    """True when every path has Parquet files and all of them have one file schema (their
    columns, types and nesting; footer metadata aside): files an engine wrote without a Spark
    schema in their footers (Sail) that any reader reads alike."""
    found: set[object] = set()
    for path in paths:
        files = parts(path)
        if not files:
            return False
        for part in files:
            try:
                found.add(pq.read_schema(part).remove_metadata())
            except (OSError, ValueError):
                return False
            if len(found) > 1:
                return False
    return bool(found)


def free_of_nulls(
    paths: Sequence[str | Path], columns: Sequence[str], footers: Footers | None = None
) -> bool:
    """True when the footers of every file of ``paths`` say that ``columns`` (top-level ones)
    hold no null: each row group has the column, with a null count of 0. False when any may
    hold one, or a footer does not say (then Spark must look)."""
    read = footers or Footers()
    for path in paths:
        for part in parts(path):
            try:
                meta = read.get(str(part))
            except OSError:
                return False
            index = {meta.schema.column(i).path: i for i in range(meta.num_columns)}
            for column in columns:
                if column not in index:
                    return False
                for g in range(meta.num_row_groups):
                    stats = meta.row_group(g).column(index[column]).statistics
                    if stats is None or not stats.has_null_count or stats.null_count:
                        return False
    return True


def rows_and_bytes(path: str | Path, footers: Footers | None = None) -> tuple[int, int]:
    """Rows and bytes of a message's data directory (or file), from its footers."""
    read = footers or Footers()
    rows = size = 0
    for part in parts(path):
        rows += read.get(str(part)).num_rows
        size += part.stat().st_size
    return rows, size
