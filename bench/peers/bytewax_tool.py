"""The workloads in bytewax 0.21, as its documentation writes per-epoch results: items carry
their epoch as an event time, a tumbling window of one epoch per key with an ``EventClock``
watermark closes each epoch, and ``fold_window`` folds it.

The watermark is the latest event time the key has seen (``wait_for_system_duration`` 0, system
time left out): a key's window for epoch e closes when an item of a later epoch reaches that
key. Items of an epoch whose window has closed go to the ``late`` stream and are counted, not
folded. Waiting k epochs (``wait_for_system_duration`` of k epochs) would admit workers up to k
epochs late, at k epochs of latency: a bound guessed in advance, where epochgate knows which
worker holds the epoch.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import bytewax.operators as op
import pyarrow as pa
import pyarrow.parquet as pq
from bytewax.dataflow import Dataflow, Stream
from bytewax.inputs import DynamicSource, StatelessSourcePartition
from bytewax.operators.windowing import EventClock, TumblingWindower, fold_window
from bytewax.outputs import DynamicSink, StatelessSinkPartition
from bytewax.testing import run_main

from peers.record import Recorder
from peers.workloads import COLUMNS, Feed

ORIGIN = datetime(2026, 1, 1, tzinfo=UTC)
EPOCH = timedelta(days=1)
"""One epoch of event time."""
BATCH = 10_000
"""Items per batch handed to the dataflow."""

Item = tuple[Any, ...]


class _FeedPartition(StatelessSourcePartition[Item]):
    def __init__(self, feed: Feed, rec: Recorder) -> None:
        self.rec = rec
        self.batches = self._batches(feed)

    def _batches(self, feed: Feed) -> Iterator[list[Item]]:
        for step in feed.steps:
            table = pq.read_table(step.path)
            tag = (step.source, step.epoch)
            columns = [table.column(i).to_pylist() for i in range(table.num_columns)]
            rows = [(*tag, *values) for values in zip(*columns, strict=True)]
            for start in range(0, len(rows), BATCH):
                if start + BATCH >= len(rows):
                    self.rec.delivered()  # the step's last batch: the worker moved on
                yield rows[start : start + BATCH]
            if not rows:
                self.rec.delivered()

    def next_batch(self) -> list[Item]:
        self.rec.start()
        return next(self.batches)  # StopIteration ends the input


class FeedSource(DynamicSource[Item]):
    """The feed's files in arrival order, as ``(source, epoch, *row)`` items."""

    def __init__(self, feed: Feed, rec: Recorder) -> None:
        self.feed = feed
        self.rec = rec

    def build(self, step_id: str, worker_index: int, worker_count: int) -> _FeedPartition:
        return _FeedPartition(self.feed, self.rec)


class _Collect(StatelessSinkPartition[tuple[int, tuple[Any, ...]]]):
    def __init__(self, rec: Recorder, rows: list[tuple[Any, ...]]) -> None:
        self.rec = rec
        self.rows = rows

    def write_batch(self, items: list[tuple[int, tuple[Any, ...]]]) -> None:
        for epoch, row in items:
            self.rows.append(row)
            self.rec.emitted(epoch)


class Collect(DynamicSink[tuple[int, tuple[Any, ...]]]):
    """Keeps each output row and records its epoch's emission."""

    def __init__(self, rec: Recorder) -> None:
        self.rec = rec
        self.rows: list[tuple[Any, ...]] = []

    def build(self, step_id: str, worker_index: int, worker_count: int) -> _Collect:
        return _Collect(self.rec, self.rows)


def _clock() -> EventClock[Item]:
    """Event time only: a fixed "now" and no wake-ups, so the watermark is the latest epoch
    the key has seen and only items (or the end of the input) close windows."""
    return EventClock(
        ts_getter=lambda item: ORIGIN + item[1] * EPOCH,
        wait_for_system_duration=timedelta(0),
        now_getter=lambda: ORIGIN,
        to_system_utc=lambda _: None,
    )


def _windower() -> TumblingWindower:
    return TumblingWindower(length=EPOCH, align_to=ORIGIN)


def running_sum(items: Stream[Item], rec: Recorder) -> Stream[tuple[int, tuple[Any, ...]]]:
    """Per account: the epoch's sum in a window, then the running total over windows."""
    keyed = op.key_on("account", items, lambda item: str(item[2]))
    sums = fold_window(
        "epoch_sum",
        keyed,
        _clock(),
        _windower(),
        builder=lambda: 0,
        folder=lambda acc, item: acc + item[3],
        merger=lambda a, b: a + b,
    )

    def add(total: int | None, window: tuple[int, int]) -> tuple[int, tuple[int, int]]:
        new = (total or 0) + window[1]
        return new, (window[0], new)

    totals = op.stateful_map("running_total", sums.down, add)
    _count_late(sums.late, rec)
    return op.map("row", totals, lambda kv: (kv[1][0], (kv[1][0], int(kv[0]), kv[1][1])))


Sides = tuple[dict[int, int], dict[int, int]]


def _fold_sides(acc: Sides, item: Item) -> Sides:
    source, _epoch, order_id, _customer, cents = item
    (acc[0] if source == "orders" else acc[1])[order_id] = cents
    return acc


def _merge_sides(a: Sides, b: Sides) -> Sides:
    a[0].update(b[0])
    a[1].update(b[1])
    return a


def per_customer_join(items: Stream[Item], rec: Recorder) -> Stream[tuple[int, tuple[Any, ...]]]:
    """Per customer: both sides of the epoch's window, joined on the order when it closes."""
    keyed = op.key_on("customer", items, lambda item: str(item[3]))
    windows = fold_window(
        "epoch_sides",
        keyed,
        _clock(),
        _windower(),
        builder=lambda: ({}, {}),
        folder=_fold_sides,
        merger=_merge_sides,
    )
    _count_late(windows.late, rec)

    def joined(kv: tuple[str, tuple[int, Sides]]) -> list[tuple[int, tuple[Any, ...]]]:
        customer, (epoch, (orders, payments)) = kv
        matched = [(orders[o], p) for o, p in payments.items() if o in orders]
        if not matched:
            return []
        row = (
            epoch,
            int(customer),
            len(matched),
            sum(c for c, _ in matched),
            sum(p for _, p in matched),
        )
        return [(epoch, row)]

    return op.flat_map("join", windows.down, joined)


def _count_late(late: op.KeyedStream[tuple[int, Item]], rec: Recorder) -> None:
    """Late items are dropped from their window: count them."""

    def count(_step: str, _item: object) -> None:
        rec.late_rows += 1

    op.inspect("late", late, count)


def run_bytewax(feed: Feed, home: Path, rec: Recorder) -> Path:
    flow = Dataflow(f"peers_{feed.workload}")
    items = op.input("feed", flow, FeedSource(feed, rec))
    build = running_sum if feed.workload == "sum" else per_customer_join
    sink = Collect(rec)
    op.output("out", build(items, rec), sink)
    run_main(flow)
    out = home / "output.parquet"
    columns = (
        list(zip(*sink.rows, strict=True)) if sink.rows else [() for _ in COLUMNS[feed.workload]]
    )
    table = pa.table(
        {
            name: pa.array(col, pa.int64())
            for name, col in zip(COLUMNS[feed.workload], columns, strict=True)
        }
    )
    pq.write_table(table, out)
    return out
