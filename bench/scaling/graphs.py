"""Generated pipelines for the scaling bench, and their seeded inputs.

* ``chain(n)``: a source, then ``n`` transforms, each reading the one before;
* ``fan_out(n)``: a source read by ``n`` transforms side by side;
* ``closing()``: the pipeline whose per-epoch cost is measured behind 10 to 100,000 closed
  epochs: two sources (one with two workers), a transform, a join, an aggregation and a sink.
  It keeps no keyed state (``bench_incremental.py`` measures a stateful stage's late epochs),
  so its closed epochs live in the ledger alone and can be written there directly
  (``scaling.history``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines.run.runtime import Runtime
from pipelines.stages.pipeline import Pipeline

EVENTS = T.StructType(
    [
        T.StructField("event_id", T.LongType()),
        T.StructField("tag", T.LongType()),
        T.StructField("value", T.LongType()),
    ]
)
TAGS = T.StructType([T.StructField("tag", T.LongType()), T.StructField("label", T.StringType())])
TAG_COUNT = 16
WORKERS = {"events": 2, "tags": 1}
"""Workers per source of ``closing()``; the generated ones have one."""


def step(df: DataFrame) -> DataFrame:
    """A chain's link: one column changed (one narrow Spark stage, as most transforms are)."""
    return df.withColumn("value", F.col("value") + 1)


def branch(k: int, n: int) -> Callable[[DataFrame], DataFrame]:
    """The ``k``-th of ``n`` transforms side by side: its share of the events."""
    return lambda df: df.where(F.col("event_id") % n == k)


def chain(n: int) -> Pipeline:
    p = Pipeline(f"chain{n}")
    previous = p.source("events", schema=EVENTS)
    for k in range(n):
        previous = p.transform(f"s{k:02d}", previous, fn=step)
    return p


def fan_out(n: int) -> Pipeline:
    p = Pipeline(f"fan{n}")
    events = p.source("events", schema=EVENTS)
    for k in range(n):
        p.transform(f"s{k:02d}", events, fn=branch(k, n))
    return p


def closing() -> Pipeline:
    p = Pipeline("closing")
    events = p.source("events", schema=EVENTS, workers=WORKERS["events"], key=["event_id"])
    tags = p.source("tags", schema=TAGS, workers=WORKERS["tags"], key=["tag"])
    positive = p.transform("positive", events, fn=lambda df: df.where(F.col("value") > 0))
    labelled = p.join("labelled", positive, tags, on=["tag"])
    p.transform(
        "per_label",
        labelled,
        fn=lambda df: df.groupBy("label").agg(F.sum("value").alias("value")),
    )
    p.sink("export", "per_label", path="export")
    return p


def write_events(path: Path, epoch: int, rows: int, *, part: int = 0) -> Path:
    """``rows`` seeded events of ``epoch`` (ids unique across epochs and parts)."""
    first = (epoch * 4 + part) * rows
    ids = np.arange(first, first + rows, dtype=np.int64)
    table = pa.table(
        {"event_id": ids, "tag": (ids * 7) % TAG_COUNT, "value": (ids * 31) % 1000 - 100}
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)
    return path


def write_tags(path: Path) -> Path:
    table = pa.table(
        {
            "tag": pa.array(range(TAG_COUNT), pa.int64()),
            "label": pa.array([f"label-{t % 5}" for t in range(TAG_COUNT)]),
        }
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)
    return path


def send_generated(rt: Runtime, inputs: Path, epoch: int, rows: int) -> None:
    """One epoch into a ``chain``/``fan_out`` pipeline: its file sent, its worker advanced."""
    handle = rt.input("events", 0)
    handle.send(write_events(inputs / f"events-{epoch}.parquet", epoch, rows))
    handle.advance_to(epoch + 1)


def send_closing(rt: Runtime, inputs: Path, epoch: int, rows: int) -> None:
    """One epoch into ``closing()``: each events worker sends half, the tags worker the table;
    every worker advanced past the epoch."""
    for w in range(WORKERS["events"]):
        path = inputs / f"events-{epoch}-{w}.parquet"
        rt.input("events", w).send(write_events(path, epoch, rows // 2, part=w))
        rt.input("events", w).advance_to(epoch + 1)
    rt.input("tags", 0).send(write_tags(inputs / f"tags-{epoch}.parquet"))
    rt.input("tags", 0).advance_to(epoch + 1)
