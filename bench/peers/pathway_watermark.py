"""The naive Pathway 0.33 form: per-epoch results as its temporal documentation writes them,
closed by the operator's event time, not by knowing which files are still to come.

The epoch is the time column of a tumbling window with ``exactly_once_behavior()`` (each window
emitted once, when the operator's time has passed its end), and for the join an
``interval_join`` on the same epoch that forgets what is two epochs old. A temporal operator's
time is the latest epoch it has seen: the window of epoch e is emitted once rows of epoch e + 1
reach it, and rows of epoch e that come later are left out of it, so the late worker's epochs
come out early and wrong. A ``shift`` of k epochs would wait for workers up to k epochs late, at
k epochs of latency: a bound guessed in advance, where a gate (``pathway_tool``) knows which
file is still to come.
"""

from __future__ import annotations

from pathlib import Path

import pathway as pw

from peers.pathway_feed import run_form
from peers.record import Recorder
from peers.workloads import Feed


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


def watermark(rows: pw.Table, feed: Feed) -> pw.Table:
    return running_sum(rows) if feed.workload == "sum" else per_customer_join(rows)


def run_pathway_watermark(feed: Feed, home: Path, rec: Recorder) -> Path:
    return run_form(feed, home, rec, watermark, markers=False)
