"""The feed as a Pathway 0.33 input, and Pathway's changes read back as each epoch's final
rows; shared by the Pathway forms.

Pathway reads no Parquet file itself (its file readers take CSV, JSON lines and text; Parquet
only inside a Delta Lake or Iceberg table), so files come in through the Python connector,
Pathway's way to feed rows from Python: ``next()`` per row, ``commit()`` per file. Each row
carries the index of its file (``step``), which tells when in the feed an output appeared, and
``end``: false for a row, true for a file's end marker (its ``file`` names the source and
worker), which a form that gates in the dataflow counts.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pathway as pw
import pyarrow as pa
import pyarrow.parquet as pq

from peers.record import Recorder
from peers.workloads import COLUMNS, Feed, Step


def backlog(feed: Feed, gate: bool) -> int:
    """Rows the connector may hand over before the engine has taken them: one commit's worth
    (a file and its marker; a whole epoch when the connector gates). Pathway splits a commit
    larger than its backlog into several engine times, each with its own output (measured:
    30,000 rows in one commit with a backlog of 10,000 came out at three times), and without a
    bound the connector reads every file at once, memory and the time from a file's arrival to
    its use growing with the input."""
    if not gate:
        return (max(s.rows for s in feed.steps) + 1) * 2
    per_epoch: dict[int, int] = {}
    for step in feed.steps:
        per_epoch[step.epoch] = per_epoch.get(step.epoch, 0) + step.rows + 1
    return max(per_epoch.values()) * 2


class Moves(pw.Schema):
    step: int
    epoch: int
    account: int
    amount: int
    end: bool
    file: str


class Sides(pw.Schema):
    step: int
    epoch: int
    side: str
    order_id: int
    customer: int
    cents: int
    end: bool
    file: str


class FeedSubject(pw.io.python.ConnectorSubject):
    """The feed's files in arrival order, each one commit of its rows (and its end marker,
    with ``markers``). With ``gate``, rows of an epoch are held back until its last file has
    arrived, then the whole epoch is one commit (epochs in order): the connector is the gate."""

    def __init__(self, feed: Feed, rec: Recorder, *, markers: bool, gate: bool = False) -> None:
        super().__init__()
        self.feed = feed
        self.rec = rec
        self.markers = markers
        self.gate = gate

    def run(self) -> None:
        self.rec.start()
        if self.gate:
            self._gated()
            return
        for i, step in enumerate(self.feed.steps):
            self._send(i, step, pq.read_table(step.path).to_pylist())
            self.commit()
            self.rec.delivered()

    def _gated(self) -> None:
        held: dict[int, list[tuple[int, Step, list[dict[str, Any]]]]] = {}
        arrived: dict[int, int] = {}
        expected = sum(self.feed.workers.values())
        done = -1
        for i, step in enumerate(self.feed.steps):
            held.setdefault(step.epoch, []).append((i, step, pq.read_table(step.path).to_pylist()))
            arrived[step.epoch] = arrived.get(step.epoch, 0) + 1
            self.rec.delivered()
            while arrived.get(done + 1) == expected:
                done += 1
                for j, file, rows in held.pop(done):
                    self._send(j, file, rows)
                self.commit()

    def _send(self, i: int, step: Step, rows: list[dict[str, Any]]) -> None:
        if self.feed.workload == "sum":
            for row in rows:
                self.next(step=i, epoch=step.epoch, end=False, file="", **row)
            if self.markers:
                file = f"{step.source}/{step.worker}"
                self.next(step=i, epoch=step.epoch, end=True, file=file, account=-1, amount=0)
            return
        value = "cents" if step.source == "orders" else "paid"
        for row in rows:
            self.next(
                step=i,
                epoch=step.epoch,
                side=step.source,
                order_id=row["order_id"],
                customer=row["customer"],
                cents=row[value],
                end=False,
                file="",
            )
        if self.markers:
            file = f"{step.source}/{step.worker}"
            self.next(
                step=i,
                epoch=step.epoch,
                side=step.source,
                order_id=-1,
                customer=-1,
                cents=0,
                end=True,
                file=file,
            )


Change = tuple[Any, tuple[int, ...], int, bool]
"""An output change: Pathway's row key, the row's values, its Pathway time, addition or not."""

Form = Callable[[pw.Table, Feed], pw.Table]
"""A workload written in Pathway: the input rows in, the result out."""


def run_form(
    feed: Feed, home: Path, rec: Recorder, form: Form, *, markers: bool, gate: bool = False
) -> Path:
    """Run ``form`` over the feed; its final rows, read back from Pathway's changes, to
    ``home / output.parquet``."""
    pw.internals.parse_graph.G.clear()
    schema = Moves if feed.workload == "sum" else Sides
    rows = pw.io.python.read(
        FeedSubject(feed, rec, markers=markers, gate=gate),
        schema=schema,
        autocommit_duration_ms=None,
        max_backlog_size=backlog(feed, gate),
    )
    result = form(rows, feed)
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
    rec.stop()
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
