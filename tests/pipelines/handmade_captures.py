"""Captured streams made by hand for replay tests: real Parquet files and a real event log,
written through ``pipelines.capture_log`` (the protocol's events, valid or not)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import types as T

from pipelines import capture_log
from progress.capture import DataFile, Event, Messages, Progress, Revision

SCHEMA = T.StructType(
    [
        T.StructField("account", T.StringType()),
        T.StructField("amount", T.LongType()),
    ]
)
ARROW = pa.schema([("account", pa.string()), ("amount", pa.int64())])

Rows = Sequence[tuple[str, int]]


class Capture:
    """A capture directory being written: ``add`` appends events after the ones it holds."""

    def __init__(
        self, directory: Path, *, stage: str = "payments", schema: T.StructType = SCHEMA
    ) -> None:
        self.directory = directory
        capture_log.create(
            directory, capture_log.new_header("upstream", stage, schema=schema.json())
        )

    def files(self, rows: Rows) -> tuple[DataFile, ...]:
        """One Parquet file of ``rows`` in the capture's data directory (none: no rows)."""
        if not rows:
            return ()
        name = f"data/{uuid.uuid4().hex}.parquet"
        path = self.directory / name
        table = pa.table(
            {"account": [r[0] for r in rows], "amount": [r[1] for r in rows]}, schema=ARROW
        )
        pq.write_table(table, path)
        return (DataFile(name, len(rows), path.stat().st_size, capture_log.sha256(path)),)

    def messages(self, time: int, rows: Rows) -> Messages:
        return Messages(time, self.files(rows))

    def revision(self, time: int, rows: Rows) -> Revision:
        return Revision(time, self.files(rows))

    def add(self, *events: Event) -> Capture:
        with capture_log.locked(self.directory) as d:
            capture_log.append(d, capture_log.length(d), list(events))
        return self

    @property
    def log(self) -> Path:
        return self.directory / capture_log.LOG


def advance(old: int, new: int) -> Progress:
    """The stream's count moved from ``old`` to ``new``."""
    return Progress(((new, 1), (old, -1)))


def done(at: int) -> Progress:
    return Progress(((at, -1),))


def epochs(capture: Capture, data: dict[int, Rows], *, until: int | None = None) -> Capture:
    """Messages at every epoch of ``data`` (in order, from 0), each epoch released after its
    message; then done, unless ``until`` says to stop with the count at that epoch."""
    last = max(data) + 1
    for epoch in range(last if until is None else until):
        capture.add(capture.messages(epoch, data.get(epoch, ())), advance(epoch, epoch + 1))
    if until is None:
        capture.add(done(last))
    return capture


def stream_rows(index: int, epochs_: int = 3) -> dict[int, Rows]:
    """Deterministic rows of stream ``index``: a few accounts per epoch, some shared."""
    return {
        e: [(f"a{(index + e + k) % 4}", 10 * index + e + k) for k in range(2 + (index + e) % 2)]
        for e in range(epochs_)
    }
