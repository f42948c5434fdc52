"""The naive bytewax 0.21 form: per-epoch results as its windowing documentation writes them,
closed by a watermark, not by knowing which files are still to come.

Items carry their epoch as an event time; a tumbling window of one epoch per key with an
``EventClock`` watermark closes each epoch, and ``fold_window`` folds it. The watermark is the
latest event time the key has seen (``wait_for_system_duration`` 0, system time left out): a
key's window for epoch e closes when an item of a later epoch reaches that key. Items of an
epoch whose window has closed go to the ``late`` stream and are counted, not folded, so the late
worker's epochs come out early and wrong. Waiting k epochs (``wait_for_system_duration`` of k
epochs) would admit workers up to k epochs late, at k epochs of latency: a bound guessed in
advance, where a gate on end markers (``bytewax_tool``) knows which file is still to come.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import bytewax.operators as op
from bytewax.dataflow import Dataflow, Stream
from bytewax.operators.windowing import EventClock, TumblingWindower, fold_window
from bytewax.testing import run_main

from peers.bytewax_feed import Collect, FeedSource, Item, Out, Rows
from peers.record import Recorder
from peers.workloads import Feed

ORIGIN = datetime(2026, 1, 1, tzinfo=UTC)
EPOCH = timedelta(days=1)
"""One epoch of event time."""

Row = tuple[Any, ...]
"""``(source, epoch, *columns)``: one input row."""


def rows(items: Stream[Item]) -> Stream[Row]:
    """One item per row (windows fold rows), the end markers left out."""

    def split(item: Item) -> list[Row]:
        if not isinstance(item, Rows):
            return []
        columns = [c.to_pylist() for c in item.batch.columns]
        return [(item.source, item.epoch, *values) for values in zip(*columns, strict=True)]

    return op.flat_map("rows", items, split)


def _clock() -> EventClock[Row]:
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


def running_sum(items: Stream[Row], rec: Recorder) -> Stream[Out]:
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
    return op.map("row", totals, lambda kv: (kv[1][0], [(kv[1][0], int(kv[0]), kv[1][1])]))


Sides = tuple[dict[int, int], dict[int, int]]


def _fold_sides(acc: Sides, item: Row) -> Sides:
    source, _epoch, order_id, _customer, cents = item
    (acc[0] if source == "orders" else acc[1])[order_id] = cents
    return acc


def _merge_sides(a: Sides, b: Sides) -> Sides:
    a[0].update(b[0])
    a[1].update(b[1])
    return a


def per_customer_join(items: Stream[Row], rec: Recorder) -> Stream[Out]:
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

    def joined(kv: tuple[str, tuple[int, Sides]]) -> list[Out]:
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
        return [(epoch, [row])]

    return op.flat_map("join", windows.down, joined)


def _count_late(late: op.KeyedStream[tuple[int, Row]], rec: Recorder) -> None:
    """Late items are dropped from their window: count them."""

    def count(_step: str, _item: object) -> None:
        rec.late_rows += 1

    op.inspect("late", late, count)


def run_bytewax_watermark(feed: Feed, home: Path, rec: Recorder) -> Path:
    flow = Dataflow(f"peers_{feed.workload}_watermark")
    items = rows(op.input("feed", flow, FeedSource(feed, rec)))
    build = running_sum if feed.workload == "sum" else per_customer_join
    sink = Collect(rec)
    op.output("out", build(items, rec), sink)
    run_main(flow)
    rec.stop()
    return sink.write(feed.workload, home / "output.parquet")
