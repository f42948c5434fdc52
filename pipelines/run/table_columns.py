"""The columns of a table sink's rows (a Delta or Iceberg table): the committed attempt's
columns from its files' footers plus the ``epoch`` column the sink adds, checked against the
table's. A table only gains columns: one that loses a column, or whose column changes type,
is refused naming the columns (``UnfitError``)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pipelines.run.published import Committed
from pipelines.stages.sink_formats import EPOCH_COLUMN


class UnfitError(Exception):
    """Rows that do not fit the table: ``reason`` names the columns."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def parquet_files(folder: Path) -> list[Path]:
    """The data files of a committed attempt, in name order."""
    return sorted(folder.glob("*.parquet"))


def columns_of(committed: Committed, table: pa.Schema | None, kind: str) -> pa.Schema | None:
    """The columns of the epoch's rows with its ``epoch`` column (from the files' footers: no
    row is read), checked against the ``table``'s (``kind``: the table's format, for the
    errors); None when there are no rows and no table to take the columns from."""
    columns: pa.Schema | None = table
    if committed.files is not None:
        files = parquet_files(committed.files)
        read = pq.read_schema(files[0]) if files else None
        if read is not None and EPOCH_COLUMN in read.names:
            raise UnfitError(
                f"its input has a column named {EPOCH_COLUMN!r}, which a {kind} sink adds "
                "itself: rename it in the stage it publishes"
            )
        if read is not None:
            columns = read.remove_metadata().append(pa.field(EPOCH_COLUMN, pa.int64()))
    if columns is not None and table is not None:
        check_columns(table, columns, kind)
    return columns


def epoch_rows(committed: Committed, columns: pa.Schema) -> pa.Table:
    """The epoch's rows, read from its files, with their ``epoch`` column (none: an empty
    table of ``columns``)."""
    if committed.files is None or not parquet_files(committed.files):
        return columns.empty_table()
    read = pq.read_table(committed.files)
    epochs = pa.repeat(pa.scalar(committed.epoch, pa.int64()), read.num_rows)
    return read.append_column(pa.field(EPOCH_COLUMN, pa.int64()), epochs)


def check_columns(have: pa.Schema, new: pa.Schema, kind: str) -> None:
    """Refuse columns the table has and the new rows lack, or that changed type."""
    missing = [f.name for f in have if f.name not in new.names]
    changed = [
        f"{f.name} ({have.field(f.name).type} in the table, {f.type} now)"
        for f in new
        if f.name in have.names and not _same_type(have.field(f.name).type, f.type)
    ]
    problems = []
    if missing:
        problems.append(f"column(s) {', '.join(missing)} of the table are gone")
    if changed:
        problems.append(f"column(s) changed type: {', '.join(changed)}")
    if problems:
        raise UnfitError(
            "; ".join(problems) + f" (a {kind} table only gains columns: publish to a new one)"
        )


def added(have: pa.Schema, new: pa.Schema) -> bool:
    """Whether ``new`` has columns the table does not."""
    return any(name not in have.names for name in new.names)


def _same_type(table: pa.DataType, rows: pa.DataType) -> bool:
    """The table's type and the rows' agree (tables store strings and binaries in their large
    or view forms, and timestamps in microseconds)."""
    if table == rows:
        return True
    families = (
        (pa.types.is_string, pa.types.is_large_string, pa.types.is_string_view),
        (pa.types.is_binary, pa.types.is_large_binary, pa.types.is_binary_view),
    )
    for family in families:
        if any(test(table) for test in family) and any(test(rows) for test in family):
            return True
    return bool(pa.types.is_timestamp(table) and pa.types.is_timestamp(rows))
