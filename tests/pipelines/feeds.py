"""``feeds``: a small pipeline with scheduled epochs, one source per close rule.

Hourly epochs from ``ORIGIN``; ``events`` (2 workers) closes 10 minutes after each epoch ends,
``files`` (2 workers) by each worker's done-marker, ``manual`` (1 worker) by its worker. Each
source's stage sums its input per epoch.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql.types import LongType, StructField, StructType

from pipelines.clock import AfterEpochEnd, DoneMarkers, EpochClock
from pipelines.dataflow import Pipeline

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

ORIGIN = datetime(2026, 11, 2, 0, 0, tzinfo=UTC)
GRACE = timedelta(minutes=10)
SCHEMA = StructType([StructField("n", LongType())])
SOURCES = {"events": 2, "files": 2, "manual": 1}


def total(df: DataFrame) -> DataFrame:
    """The sum of ``n`` in the epoch's input."""
    from pyspark.sql import functions as F

    return df.agg(F.sum("n").cast("long").alias("total"), F.count("*").alias("rows"))


def feeds(markers: Path) -> Pipeline:
    p = Pipeline("feeds", clock=EpochClock("0 * * * *", timedelta(hours=1), ORIGIN))
    events = p.source("events", schema=SCHEMA, workers=2, close=AfterEpochEnd(GRACE))
    files = p.source("files", schema=SCHEMA, workers=2, close=DoneMarkers(str(markers)))
    manual = p.source("manual", schema=SCHEMA)
    p.transform("events_out", events, fn=total)
    p.transform("files_out", files, fn=total)
    p.transform("manual_out", manual, fn=total)
    return p


def at(hours: float) -> datetime:
    """``hours`` after the clock's origin."""
    return ORIGIN + timedelta(hours=hours)


def mark(markers: Path, epoch: int, worker: int) -> None:
    """Worker ``worker`` of ``files`` delivers its done-marker for ``epoch``."""
    path = DoneMarkers(str(markers)).marker(epoch, worker)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()


def write_input(root: Path, source: str, epoch: int, worker: int) -> Path:
    """A small Parquet file of ``n`` values, different for each source, epoch and worker."""
    start = 1000 * epoch + 100 * worker + len(source)
    path = root / source / f"epoch={epoch}" / f"worker={worker}.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"n": pa.array(range(start, start + 5 + worker), pa.int64())}), path)
    return path
