"""An upquery's read of a few keys' rows from key-sorted message files, in the driver.

The messages a partial stage reads are sorted by its key in small row groups
(``pipelines.run.layout``), so the footer of each file tells which of its row groups can hold a key
(their min and max). A Spark scan of them pays Spark's fixed cost for every file it opens
(reader, footer, task split: 3.5-4 ms a file, measured on 200,000-row messages), so an upquery
of one key grew with the number of epochs of history. Read here instead, with pyarrow in the
driver, a file costs the read of the row groups that can hold the keys, and its footer is read
once per process (``pipelines.spark.footers.Footers``: an attempt's files are never rewritten,
so a footer never goes stale). What the scan read is counted (``ScanPlan``), so tests can tell
that it skipped the rest.

``plan`` decides: the driver reads when the row groups that can hold the keys have at most
``DRIVER_ROWS`` rows and every column has a plain type (integers, floats, strings, binary,
booleans, dates, decimals) whose Parquet reading pyarrow and Spark agree on; otherwise (many
keys, files that are not sorted by the key, timestamps or nested columns) the upquery scans
with Spark as before (``pipelines.reads.upquery``). Either way the rows are every row of the keys in
the files named, filtered by exact equality on every key column.

Measured on 50 sorted messages of 200,000 rows (1,000,000 keys), one key costs the driver
1.4-1.6 ms of CPU per file (a footer already read; 2.7 ms reading every column of the row
group, 0.15 ms the footer). Considered and not taken: compacting older epochs' messages into a
few key-sorted files covering epoch ranges, recorded in the ledger. It makes a key's read nearly
independent of the epochs (one key, CPU: 4.9 and 5.9 ms from one such file of 25 and of 50
epochs, against 33 and 75 ms from the per-epoch files), but it needs a writer in the background
of runs, a ledger migration, and invalidation on every revision inside a compacted range, to
save about 1.5 ms per epoch of history a fill reads, next to a fill's fixed cost of a few
hundred ms (its Spark job and the state store's transaction).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import reduce
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipelines.spark.footers import Footers
from state_store import Key

if TYPE_CHECKING:
    from pyspark.sql.types import DataType, StructType

DRIVER_ROWS = 4_000_000
"""At most this many rows in the row groups that can hold the keys, the driver reads them
(about a second of decoding); past it a Spark scan shares the work among its cores."""


@dataclass(frozen=True)
class Part:
    """The row groups of one file that can hold the keys, and the epoch of its message."""

    path: str
    epoch: int
    groups: tuple[int, ...]


@dataclass(frozen=True)
class ScanPlan:
    """What a key scan reads: ``parts`` (row groups that can hold the keys, per file), out of
    ``files`` files of ``row_groups`` row groups; ``rows`` rows to decode; ``driver`` whether
    the driver reads them (else Spark scans the files)."""

    parts: tuple[Part, ...]
    files: int
    row_groups: int
    rows: int
    driver: bool

    @property
    def groups_read(self) -> int:
        return sum(len(p.groups) for p in self.parts)


def arrow_type(data_type: DataType) -> pa.DataType | None:
    """The Arrow type pyarrow reads a Spark column of ``data_type`` as, for plain types; None
    for the others (timestamps, whose Parquet encodings differ; nested types)."""
    from pyspark.sql import types as T

    plain: list[tuple[type[DataType], pa.DataType]] = [
        (T.BooleanType, pa.bool_()),
        (T.ByteType, pa.int8()),
        (T.ShortType, pa.int16()),
        (T.IntegerType, pa.int32()),
        (T.LongType, pa.int64()),
        (T.FloatType, pa.float32()),
        (T.DoubleType, pa.float64()),
        (T.StringType, pa.string()),
        (T.BinaryType, pa.binary()),
        (T.DateType, pa.date32()),
    ]
    if isinstance(data_type, T.DecimalType):
        return pa.decimal128(data_type.precision, data_type.scale)
    for spark_type, arrow in plain:
        if type(data_type) is spark_type:
            return arrow
    return None


def _may_hold(meta: pq.RowGroupMetaData, columns: Sequence[int], keys: Sequence[Key]) -> bool:
    """Whether a row group may hold one of ``keys``, from its key columns' min and max (a
    column without them, or values that do not compare, may hold anything)."""
    bounds = []
    for index in columns:
        stats = meta.column(index).statistics
        if stats is None or not stats.has_min_max:
            return True
        bounds.append((stats.min, stats.max))
    try:
        return any(
            all(low <= value <= high for value, (low, high) in zip(key, bounds, strict=True))
            for key in keys
        )
    except TypeError:
        return True


def _plain_keys(
    key: Sequence[str], keys: Sequence[Key], types: Mapping[str, pa.DataType | None]
) -> bool:
    """Whether every key's values are values of the key columns' Arrow types as they are (not
    NaN, which Spark finds equal to NaN; not out of a narrow type's range)."""
    for i, column in enumerate(key):
        values = [k[i] for k in keys]
        if any(isinstance(v, float) and math.isnan(v) for v in values):
            return False
        try:
            pa.array(values, type=types[column])
        except (pa.ArrowException, TypeError, ValueError, OverflowError):
            return False
    return True


def plan(
    files: Mapping[str, int],
    schema: StructType,
    key: Sequence[str],
    keys: Sequence[Key],
    footers: Footers,
    *,
    driver_rows: int = DRIVER_ROWS,
) -> ScanPlan:
    """The row groups of ``files`` (path -> epoch of its message) that can hold ``keys``, and
    whether the driver reads them (see the module docs)."""
    types = {f.name: arrow_type(f.dataType) for f in schema.fields}
    plain = all(t is not None for t in types.values()) and _plain_keys(key, keys, types)
    parts: list[Part] = []
    groups = rows = 0
    for path, epoch in files.items():
        meta = footers.get(path)
        groups += meta.num_row_groups
        have = meta.schema.to_arrow_schema()
        if plain and any(
            have.get_field_index(name) < 0 or have.field(name).type != wanted
            for name, wanted in types.items()
        ):
            plain = False
        names = meta.schema.names  # leaf columns: the key columns are top-level plain ones
        columns = [names.index(c) for c in key if c in names]
        if len(columns) < len(key):
            plain = False
            continue
        chosen = tuple(
            g for g in range(meta.num_row_groups) if _may_hold(meta.row_group(g), columns, keys)
        )
        if chosen:
            parts.append(Part(path, epoch, chosen))
            rows += sum(meta.row_group(g).num_rows for g in chosen)
    return ScanPlan(
        parts=tuple(parts),
        files=len(files),
        row_groups=groups,
        rows=rows,
        driver=plain and rows <= driver_rows,
    )


def read(
    scan: ScanPlan,
    schema: StructType,
    key: Sequence[str],
    keys: Sequence[Key],
    footers: Footers,
    *,
    epoch_column: str,
) -> pa.Table:
    """The rows of ``keys`` in the row groups ``scan`` names, with ``schema``'s columns and
    ``epoch_column`` (the epoch of each row's message)."""
    columns = [f.name for f in schema.fields]
    types = {f.name: arrow_type(f.dataType) for f in schema.fields}
    values = {c: pa.array([k[i] for k in keys], type=types[c]) for i, c in enumerate(key)}
    target = pa.schema(  # every column nullable, as Spark reads them: files may differ in that
        [*(pa.field(c, types[c]) for c in columns), pa.field(epoch_column, pa.int64())]
    )
    found: list[pa.Table] = []
    for part in scan.parts:
        file = pq.ParquetFile(part.path, metadata=footers.get(part.path))
        groups = list(part.groups)
        keyed = file.read_row_groups(groups, columns=list(key), use_threads=False)
        mask = reduce(pc.and_, (pc.is_in(keyed[c], value_set=values[c]) for c in key))
        if not pc.any(mask).as_py():  # the key columns alone tell: most files hold no row
            continue
        rows = file.read_row_groups(groups, columns=columns, use_threads=False).filter(mask)
        epochs = pa.array([part.epoch] * rows.num_rows, type=pa.int64())
        found.append(rows.select(columns).append_column(epoch_column, epochs).cast(target))
    if not found:
        return target.empty_table()
    table = pa.concat_tables(found)
    if len(key) == 1:
        return table
    # each column's value among the keys' is not yet one of the keys: match whole keys
    return table.join(pa.table(values), keys=list(key), join_type="left semi").select(target.names)
