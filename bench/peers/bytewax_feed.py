"""The feed as a bytewax 0.21 input and the output as a sink, shared by both bytewax forms.

Each file of the feed is one ``next_batch`` of the source: its rows, as Arrow record batches
(``Rows``), then its end marker (``End``: source, worker, epoch). A form that gates on the
markers knows from them when an epoch's files have all arrived; the watermark form reads only
the rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from bytewax.inputs import DynamicSource, StatelessSourcePartition
from bytewax.outputs import DynamicSink, StatelessSinkPartition

from peers.record import Recorder
from peers.workloads import COLUMNS, Feed

BATCH = 65_536
"""Rows per Arrow record batch handed to the dataflow."""


@dataclass(frozen=True)
class Rows:
    """Some of one file's rows."""

    source: str
    epoch: int
    batch: pa.RecordBatch


@dataclass(frozen=True)
class End:
    """One file has ended: ``worker`` of ``source`` has delivered all of ``epoch``."""

    source: str
    worker: int
    epoch: int


Item = Rows | End


class _FeedPartition(StatelessSourcePartition[Item]):
    def __init__(self, feed: Feed, rec: Recorder) -> None:
        self.rec = rec
        self.files = self._files(feed)

    def _files(self, feed: Feed) -> Iterator[list[Item]]:
        for step in feed.steps:
            table = pq.read_table(step.path)
            batches = table.to_batches(max_chunksize=BATCH) or [
                pa.RecordBatch.from_pylist([], schema=table.schema)  # an empty file still counts
            ]
            items: list[Item] = [Rows(step.source, step.epoch, b) for b in batches]
            items.append(End(step.source, step.worker, step.epoch))
            self.rec.delivered()  # handed over with its marker: the worker moved on
            yield items

    def next_batch(self) -> list[Item]:
        self.rec.start()
        return next(self.files)  # StopIteration ends the input


class FeedSource(DynamicSource[Item]):
    """The feed's files in arrival order, each its rows then its end marker."""

    def __init__(self, feed: Feed, rec: Recorder) -> None:
        self.feed = feed
        self.rec = rec

    def build(self, step_id: str, worker_index: int, worker_count: int) -> _FeedPartition:
        return _FeedPartition(self.feed, self.rec)


Out = tuple[int, list[tuple[Any, ...]] | pa.Table]
"""Output of one epoch, with that epoch: rows that start with the epoch, or a table of the
workload's other columns (``COLUMNS``, in order)."""


class _Collect(StatelessSinkPartition[Any]):
    def __init__(self, rec: Recorder, sink: Collect) -> None:
        self.rec = rec
        self.sink = sink

    def write_batch(self, items: list[Any]) -> None:
        epochs = set()
        for item in items:
            epoch, rows = item[1] if isinstance(item[0], str) else item  # keyed or not
            if isinstance(rows, pa.Table):
                self.sink.tables.append((epoch, rows))
            else:
                self.sink.rows += rows
            epochs.add(epoch)
        for epoch in sorted(epochs):
            self.rec.emitted(epoch)


class Collect(DynamicSink[Any]):
    """Keeps each epoch's output (``Out``, or ``(key, Out)``) as it comes, rows or tables, and
    records its epoch's emission."""

    def __init__(self, rec: Recorder) -> None:
        self.rec = rec
        self.rows: list[tuple[Any, ...]] = []
        self.tables: list[tuple[int, pa.Table]] = []

    def build(self, step_id: str, worker_index: int, worker_count: int) -> _Collect:
        return _Collect(self.rec, self)

    def write(self, workload: str, out: Path) -> Path:
        """Everything kept, as one Parquet file in the workload's columns."""
        names = COLUMNS[workload]
        columns = list(zip(*self.rows, strict=True)) if self.rows else [() for _ in names]
        arrays = {n: pa.array(c, pa.int64()) for n, c in zip(names, columns, strict=True)}
        parts = [pa.table(arrays)]
        for epoch, table in self.tables:
            cast = [table.column(i).cast(pa.int64()) for i in range(table.num_columns)]
            epochs = pa.array(np.full(table.num_rows, epoch, np.int64))
            parts.append(pa.table([epochs, *cast], names=list(names)))
        pq.write_table(pa.concat_tables(parts), out)
        return out
