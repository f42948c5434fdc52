"""The layout of the messages that partial stages read: sorted by their key, in small row groups.

An upquery reads a partial stage's input messages at every epoch, filtered by a few keys
(``pipelines.reads.upquery``). Written as they come, every file holds every key range, so a key
filter skips nothing and an upquery's cost grows with the whole history. Sorted by the partial
stage's key, in row groups of a few thousand rows, each file's footer tells which row groups can
hold a key (Parquet min/max statistics), and the scan reads about one row group per file per key.

Only messages that a partial stage reads are laid out so (``sort_key``): those of the stages and
sources it reads directly, and of those that a union below it catalogs as they are. Every other
message is written as before, and a source file that needs no sorting is still copied byte for
byte. Measured at 200,000 rows per message (1,000,000 keys), on 2 busy cores: a send of a
checked source file took 0.15 s sorted against 0.07 s copied (medians of 8); the scan of one key
over 25 and 50 epochs took 0.6-2.0 s and 1.0-2.3 s unsorted, 0.2 s and 0.2 s sorted (with the
scan settings of ``pipelines.reads.upquery``). Row groups of 16,384 rows keep the footers small
(about a dozen per message) while a key's scan reads one of them per file. Within a row group, pages
of 4 KB and a page index (each page's min and max) let the reader decode only the pages that can
hold the key, not the whole row group: the work a scan still does per file, so per epoch of history.
Measured on 10 and 50 such messages (200,000 rows each, 1,000,000 keys, 2 busy cores), a scan of one
key cost 6.7-9.5 ms more per file with one page per column of a row group, and 3.5-4 ms with pages
of 4 KB (0.55-0.63 s against 0.34-0.44 s for 50 files); an upquery of a few keys reads these row
groups in the driver instead (``pipelines.reads.key_scan``). Considered and not taken: a per-message
key-range index in the ledger (unsorted messages span every key, so it skips nothing) and a
key-sorted copy written at the first upquery (the first read of a key would pay for the whole
history)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import pyarrow as pa
import pyarrow.parquet as pq

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, DataFrameWriter

ROW_GROUP_ROWS = 16_384
"""Rows per row group of a sorted message written with pyarrow (a checked source file)."""
ROW_GROUP_BYTES = 1 << 20
"""Bytes per row group (before compression) of a sorted message written by Spark."""
PAGE_BYTES = 4_096
"""Bytes per page (before compression) of a sorted message, with a page index: a key's scan
decodes the pages that can hold it, not the whole row group."""


class Reading(Protocol):
    """What ``sort_key`` looks at in a stage (``pipelines.stages.kinds.Stage``)."""

    @property
    def name(self) -> str: ...
    @property
    def inputs(self) -> tuple[str, ...]: ...
    @property
    def key(self) -> tuple[str, ...]: ...
    @property
    def partial(self) -> object | None: ...
    @property
    def catalogs_inputs(self) -> bool: ...


def sort_key(stages: Mapping[str, Reading], name: str) -> tuple[str, ...] | None:
    """The columns the messages of ``name`` are sorted by: the key of the first partial stage
    (in definition order) that reads them from a full stage, directly or through unions; None
    when none does."""
    seen: set[str] = set()

    def search(upstream: str) -> tuple[str, ...] | None:
        seen.add(upstream)
        for reader in stages.values():
            if upstream not in reader.inputs:
                continue
            if reader.partial is not None and stages[upstream].partial is None:
                return reader.key
            if reader.catalogs_inputs and reader.name not in seen:
                found = search(reader.name)
                if found is not None:
                    return found
        return None

    return search(name)


def write_sorted(table: pa.Table, key: Sequence[str], path: Path) -> None:
    """Write ``table`` sorted by ``key`` into ``path`` (a Parquet file), in small row groups of
    small pages, with a page index."""
    ordered = table.sort_by([(column, "ascending") for column in key])
    pq.write_table(
        ordered,
        path,
        row_group_size=ROW_GROUP_ROWS,
        data_page_size=PAGE_BYTES,
        write_page_index=True,
    )


def writer(
    df: DataFrame, key: Sequence[str] | None, *, partition: Sequence[str] = ()
) -> DataFrameWriter:
    """The writer of ``df`` as a message: as it is, or with ``key`` sorted within each file, in
    small row groups of small pages (Spark's Parquet writer adds the page index itself).
    ``partition``: columns to write one directory per value of (then ``key`` starts with them,
    so the sort a partitioned write needs keeps the key's order within each directory)."""
    if not key:
        return df.write
    out = df.sortWithinPartitions(*key).write
    if partition:
        out = out.partitionBy(*partition)
    if list(key) == list(partition):
        return out
    return out.option("parquet.block.size", ROW_GROUP_BYTES).option("parquet.page.size", PAGE_BYTES)
