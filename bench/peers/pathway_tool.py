"""The workloads in Pathway 0.33, as its documentation writes per-epoch results: a Python
connector that commits each file as one transaction, the epoch as the time column of a tumbling
window with ``exactly_once_behavior()`` (each window emitted once, when the operator's time has
passed its end), and for the join an ``interval_join`` on the same epoch that forgets what is
two epochs old.

A temporal operator's time is the latest epoch it has seen: the window of epoch e is emitted
once rows of epoch e + 1 reach it, and rows of epoch e that come later are left out of it. A
``shift`` of k epochs would wait for workers up to k epochs late, at k epochs of latency: a
bound guessed in advance, where epochgate knows which worker holds the epoch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pathway as pw
import pyarrow as pa
import pyarrow.parquet as pq

from peers.record import Recorder
from peers.workloads import COLUMNS, Feed

BACKLOG = 10_000
"""Rows the connector may hand over before the engine has taken them: without a bound it reads
every file at once, and memory and the time from a file's arrival to its use grow with the
input."""


class Moves(pw.Schema):
    step: int
    epoch: int
    account: int
    amount: int


class Sides(pw.Schema):
    step: int
    epoch: int
    side: str
    order_id: int
    customer: int
    cents: int


class FeedSubject(pw.io.python.ConnectorSubject):
    """The feed's files in arrival order; each file is one commit. Each row carries the index
    of its file (``step``), which tells when in the feed an output appeared."""

    def __init__(self, feed: Feed, rec: Recorder) -> None:
        super().__init__()
        self.feed = feed
        self.rec = rec

    def run(self) -> None:
        self.rec.start()
        for i, step in enumerate(self.feed.steps):
            table = pq.read_table(step.path).to_pylist()
            if self.feed.workload == "sum":
                for row in table:
                    self.next(step=i, epoch=step.epoch, **row)
            else:
                value = "cents" if step.source == "orders" else "paid"
                for row in table:
                    self.next(
                        step=i,
                        epoch=step.epoch,
                        side=step.source,
                        order_id=row["order_id"],
                        customer=row["customer"],
                        cents=row[value],
                    )
            self.commit()
            self.rec.delivered()


def running_sum(moves: pw.Table) -> pw.Table:
    per_epoch = moves.windowby(
        moves.epoch,
        window=pw.temporal.tumbling(duration=1),
        instance=moves.account,
        behavior=pw.temporal.exactly_once_behavior(),
    ).reduce(
        account=pw.this._pw_instance,
        epoch=pw.this._pw_window_start,
        amount=pw.reducers.sum(pw.this.amount),
    )
    return per_epoch.groupby(per_epoch.account).reduce(
        epoch=pw.reducers.max(pw.this.epoch),
        account=pw.this.account,
        total=pw.reducers.sum(pw.this.amount),
    )


def per_customer_join(rows: pw.Table) -> pw.Table:
    orders = rows.filter(rows.side == "orders")
    payments = rows.filter(rows.side == "payments")
    paid = orders.interval_join(
        payments,
        orders.epoch,
        payments.epoch,
        pw.temporal.interval(0, 0),
        orders.order_id == payments.order_id,
        orders.customer == payments.customer,
        behavior=pw.temporal.common_behavior(cutoff=2),
    ).select(epoch=orders.epoch, customer=orders.customer, cents=orders.cents, paid=payments.cents)
    return paid.windowby(
        paid.epoch,
        window=pw.temporal.tumbling(duration=1),
        instance=paid.customer,
        behavior=pw.temporal.exactly_once_behavior(),
    ).reduce(
        epoch=pw.this._pw_window_start,
        customer=pw.this._pw_instance,
        n=pw.reducers.count(),
        cents=pw.reducers.sum(pw.this.cents),
        paid=pw.reducers.sum(pw.this.paid),
    )


Change = tuple[Any, tuple[int, ...], int, bool]
"""An output change: Pathway's row key, the row's values, its Pathway time, addition or not."""


def run_pathway(feed: Feed, home: Path, rec: Recorder) -> Path:
    pw.internals.parse_graph.G.clear()
    schema = Moves if feed.workload == "sum" else Sides
    rows = pw.io.python.read(
        FeedSubject(feed, rec),
        schema=schema,
        autocommit_duration_ms=None,
        max_backlog_size=BACKLOG,
    )
    result = running_sum(rows) if feed.workload == "sum" else per_customer_join(rows)
    names = COLUMNS[feed.workload]
    changes: list[Change] = []
    steps: dict[int, int] = {}  # Pathway time -> files delivered by then

    def on_change(key: Any, row: dict[str, Any], time: int, is_addition: bool) -> None:
        values = tuple(int(row[n]) for n in names)
        if is_addition:
            rec.emitted(values[0])
        changes.append((key, values, time, is_addition))

    def on_step(key: Any, row: dict[str, Any], time: int, is_addition: bool) -> None:
        if is_addition:
            steps[time] = max(steps.get(time, 0), int(row["step"]) + 1)

    pw.io.subscribe(result, on_change=on_change)
    pw.io.subscribe(rows.reduce(step=pw.reducers.max(pw.this.step)), on_change=on_step)
    pw.run(monitoring_level=pw.MonitoringLevel.NONE)
    final = settle(feed, rec, changes, steps)
    out = home / "output.parquet"
    columns = list(zip(*final, strict=True)) if final else [() for _ in names]
    arrays = {n: pa.array(c, pa.int64()) for n, c in zip(names, columns, strict=True)}
    pq.write_table(pa.table(arrays), out)
    return out


def settle(
    feed: Feed, rec: Recorder, changes: list[Change], steps: dict[int, int]
) -> list[tuple[int, ...]]:
    """The rows each epoch finally output, from Pathway's changes. A row replaced at the same
    time by its key's row of a later epoch stays (the running total moved on); any other row
    taken back was emitted too early, and so was any row emitted at a Pathway time when the
    files of its epoch had not all been delivered."""
    delivered = sorted(steps.items())
    kept: dict[tuple[int, ...], int] = {}
    added: dict[tuple[Any, int], int] = {}
    for key, values, time, is_addition in changes:
        if is_addition:
            kept[values] = kept.get(values, 0) + 1
            added[key, time] = max(added.get((key, time), -1), values[0])
            upto = max((n for t, n in delivered if t <= time), default=0)
            if upto < feed.closes.get(values[0], 0):
                rec.early(values[0])
    for key, values, time, is_addition in changes:
        if not is_addition and added.get((key, time), -1) <= values[0]:
            kept[values] = kept.get(values, 0) - 1
            rec.early(values[0])
    return [v for v, n in kept.items() for _ in range(n)]
