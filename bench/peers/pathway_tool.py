"""The workloads in Pathway 0.33, exact: each epoch's result only once all of its files are in.

Pathway's own way to close an epoch is event time: a temporal window or an interval join with a
behavior (``exactly_once_behavior``, ``common_behavior(delay, cutoff)``), which closes what the
operator's time has passed, not what every worker has delivered (``pathway_watermark``, the
naive form: the late worker's epochs come out early and wrong). Two exact forms were measured
(``PATHWAY_FORMS``; ``run_pathway(feed, home, rec, form)``), 100,000 rows/epoch, 3 epochs, one
run each, on a loaded 2-core machine:

* ``gate-join``: the end markers in the dataflow. Markers grouped per epoch and their files
  counted, the epochs with every file ended joined with the rows' per-epoch result (``groupby``
  + ``reduce`` over epoch and key); the running total a ``groupby(account)`` over the gated
  epochs. Exact in every run: sum 53,647 rows/s, join 75,062 rows/s.
* ``connector-gate``: the gate in the Python connector (user code, as the feed is): it holds an
  epoch's rows until its last file is in and commits the epoch whole, epochs in order; the
  dataflow is the same ``groupby`` + ``reduce`` with nothing to wait for. Sum 62,247 rows/s,
  join 63,389 rows/s, but not exact: Pathway does not keep one commit of the Python connector in
  one engine time (the last epoch's commit came out at two times, the first with a few
  accounts' partial totals), so an epoch can still come out early.

``gate-join`` is Pathway's row in the bench: the one exact form, and as fast as the other within
the noise of those runs. Both spend most of their time handing rows to the engine one ``next()``
at a time (``pathway_feed``).

Its engine runs on as many threads as the machine has cores (``PATHWAY_THREADS``, set for its
process by ``bench_peers``; Pathway's default is one): at 100,000 rows/epoch, 20 epochs, one run
each on a quiet 2-core machine, two threads against one gave sum 69,059 against 57,135 rows/s
and join 112,319 against 103,892.
"""

from __future__ import annotations

from pathlib import Path

import pathway as pw

from peers.pathway_feed import Form, run_form
from peers.record import Recorder
from peers.workloads import Feed


def _running_total(per_epoch: pw.Table) -> pw.Table:
    """Per account, the sum over the released epochs: its total as of the latest one."""
    return per_epoch.groupby(per_epoch.account).reduce(
        epoch=pw.reducers.max(pw.this.epoch),
        account=pw.this.account,
        total=pw.reducers.sum(pw.this.amount),
    )


def _sums(moves: pw.Table) -> pw.Table:
    return moves.groupby(moves.epoch, moves.account).reduce(
        epoch=pw.this.epoch, account=pw.this.account, amount=pw.reducers.sum(pw.this.amount)
    )


def _per_customer(rows: pw.Table) -> pw.Table:
    orders = rows.filter(rows.side == "orders")
    payments = rows.filter(rows.side == "payments")
    paid = orders.join(
        payments,
        orders.epoch == payments.epoch,
        orders.order_id == payments.order_id,
        orders.customer == payments.customer,
    ).select(epoch=orders.epoch, customer=orders.customer, cents=orders.cents, paid=payments.cents)
    return paid.groupby(paid.epoch, paid.customer).reduce(
        epoch=pw.this.epoch,
        customer=pw.this.customer,
        n=pw.reducers.count(),
        cents=pw.reducers.sum(pw.this.cents),
        paid=pw.reducers.sum(pw.this.paid),
    )


# -- connector-gate: whole epochs in, in order -----------------------------------------------


def connector_gate(rows: pw.Table, feed: Feed) -> pw.Table:
    if feed.workload == "sum":
        return _running_total(_sums(rows))
    return _per_customer(rows)


# -- gate-join: the end markers counted in the dataflow --------------------------------------


def _complete(rows: pw.Table, feed: Feed) -> pw.Table:
    """The epochs whose every expected file has ended."""
    ends = rows.filter(rows.end)
    counted = ends.groupby(ends.epoch).reduce(
        epoch=pw.this.epoch, files=pw.reducers.count_distinct(pw.this.file)
    )
    return counted.filter(counted.files == sum(feed.workers.values()))


def _gated(result: pw.Table, complete: pw.Table) -> pw.Table:
    return result.join(complete, result.epoch == complete.epoch).select(*pw.left)


def gate_join(rows: pw.Table, feed: Feed) -> pw.Table:
    complete = _complete(rows, feed)
    data = rows.filter(~rows.end)
    if feed.workload == "sum":
        return _running_total(_gated(_sums(data), complete))
    return _gated(_per_customer(data), complete)


PATHWAY_FORMS: dict[str, tuple[Form, bool, bool]] = {
    "gate-join": (gate_join, True, False),
    "connector-gate": (connector_gate, False, True),
}
"""Each exact form: the dataflow, whether the feed sends end markers, whether the connector
gates."""
BEST = "gate-join"


def run_pathway(feed: Feed, home: Path, rec: Recorder, form: str = BEST) -> Path:
    build, markers, gate = PATHWAY_FORMS[form]
    return run_form(feed, home, rec, build, markers=markers, gate=gate)
