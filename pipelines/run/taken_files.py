"""A committed attempt's Parquet files taken into a table as they are: each file's footer read
once, whether the table can take them unchanged, and their hard links in the table's folder of
the epoch (Delta's ``epoch=N``, Iceberg's ``data/epoch=N``). No row is read or written."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pipelines.run.published import Committed
from pipelines.run.storage import link_or_copy
from pipelines.run.table_columns import parquet_files


@dataclass(frozen=True)
class Taken:
    """One attempt file linked into a table: its path there, its name relative to the table's
    folder, and its footer."""

    path: Path
    name: str
    footer: pq.FileMetaData


def footers(committed: Committed) -> dict[Path, pq.FileMetaData]:
    """Each data file of the committed attempt with its footer, in name order (none without
    files)."""
    if committed.files is None:
        return {}
    return {path: pq.read_metadata(path) for path in parquet_files(committed.files)}


def as_they_are(found: dict[Path, pq.FileMetaData], *, nanoseconds: bool = True) -> bool:
    """Whether a table can take the files of ``found`` as they are: none of their columns is an
    INT96 timestamp (Spark's legacy encoding, which table readers need not read), nor, unless
    ``nanoseconds``, a timestamp in nanoseconds (a unit Iceberg's version 2 tables lack)."""
    for footer in found.values():
        columns = footer.schema
        if any(columns.column(i).physical_type == "INT96" for i in range(len(columns))):
            return False
        if not nanoseconds and any(
            pa.types.is_timestamp(f.type) and f.type.unit == "ns" for f in columns.to_arrow_schema()
        ):
            return False
    return True


def link(
    committed: Committed, found: dict[Path, pq.FileMetaData], folder: Path, partition: str
) -> list[Taken]:
    """Hard links of the files of ``found`` in ``folder / partition``, named after the attempt
    (a link a killed publish left is taken as it is)."""
    (folder / partition).mkdir(parents=True, exist_ok=True)
    taken = []
    for source, footer in found.items():
        name = f"{partition}/{committed.attempt}-{source.name}"
        target = folder / name
        if not target.exists():
            link_or_copy(str(source), str(target))
        taken.append(Taken(target, name, footer))
    return taken
