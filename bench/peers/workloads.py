"""The two workloads, their seeded inputs (Parquet files per source, worker and epoch), the
order those files arrive in, and the DuckDB SQL oracle every tool's output is checked against.

* ``sum``: a per-key running sum. ``moves`` has 2 workers, each delivering its epochs in order;
  the output of epoch e is the new running total of every account epoch e moved.
* ``join``: ``orders`` (1 worker) joined with ``payments`` (2 workers) on the order, totals per
  customer and epoch. Payments' worker 1 is late: its epoch-e file arrives after orders and
  payments' worker 0 have delivered epoch e + 1. An epoch is complete only then.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

WORKLOADS = ("sum", "join")


@dataclass(frozen=True)
class Size:
    rows: int
    """Input rows per epoch (all sources and workers of the workload together)."""
    epochs: int
    accounts: int = 100_000
    customers: int = 1_000


@dataclass(frozen=True)
class Step:
    """One file's arrival: a worker's data of one epoch, after which the worker has moved past
    that epoch."""

    source: str
    worker: int
    epoch: int
    path: Path
    rows: int


@dataclass(frozen=True)
class Feed:
    """The files of a workload in the order they arrive, and when each epoch is complete."""

    workload: str
    steps: tuple[Step, ...]
    workers: dict[str, int]
    closes: dict[int, int] = field(default_factory=dict)
    """Epoch -> the number of steps delivered when its last file has arrived."""

    @property
    def epochs(self) -> int:
        return len(self.closes)

    @property
    def rows(self) -> int:
        return sum(s.rows for s in self.steps)

    def files(self, source: str, epoch: int) -> list[Path]:
        return [s.path for s in self.steps if s.source == source and s.epoch == epoch]

    def dump(self, path: Path) -> None:
        steps = [[s.source, s.worker, s.epoch, str(s.path), s.rows] for s in self.steps]
        raw = {"workload": self.workload, "steps": steps, "workers": self.workers}
        path.write_text(json.dumps({**raw, "closes": self.closes}))

    @classmethod
    def load(cls, path: Path) -> Feed:
        raw = json.loads(path.read_text())
        steps = tuple(Step(s, w, e, Path(p), n) for s, w, e, p, n in raw["steps"])
        closes = {int(e): n for e, n in raw["closes"].items()}
        return cls(raw["workload"], steps, raw["workers"], closes)


def generate(root: Path, workload: str, size: Size, seed: int = 14) -> Feed:
    """Write the workload's inputs under ``root / workload`` and return the order they arrive
    in."""
    rng = np.random.default_rng(seed)
    base = root / workload
    files: dict[tuple[str, int, int], Step] = {}

    def write(source: str, worker: int, epoch: int, table: pa.Table) -> None:
        path = base / source / f"epoch={epoch}" / f"worker={worker}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, path)
        files[source, worker, epoch] = Step(source, worker, epoch, path, table.num_rows)

    for epoch in range(size.epochs):
        if workload == "sum":
            half = size.rows // 2
            for worker, n in ((0, half), (1, size.rows - half)):
                accounts = rng.integers(0, size.accounts, n, dtype=np.int64)
                amounts = rng.integers(-5_000, 10_000, n, dtype=np.int64)
                write(
                    worker=worker,
                    source="moves",
                    epoch=epoch,
                    table=pa.table({"account": accounts, "amount": amounts}),
                )
        else:
            n = size.rows // 2
            first = epoch * n
            order_id = np.arange(first, first + n, dtype=np.int64)
            customer = rng.integers(0, size.customers, n, dtype=np.int64)
            cents = rng.integers(100, 50_000, n, dtype=np.int64)
            write(
                "orders",
                0,
                epoch,
                pa.table({"order_id": order_id, "customer": customer, "cents": cents}),
            )
            paid = rng.random(n) < 0.9  # an order without its payment does not join
            paid_cents = cents - rng.integers(0, 100, n, dtype=np.int64)
            for worker in (0, 1):
                mine = paid & (order_id % 2 == worker)
                write(
                    "payments",
                    worker,
                    epoch,
                    pa.table(
                        {
                            "order_id": order_id[mine],
                            "customer": customer[mine],
                            "paid": paid_cents[mine],
                        }
                    ),
                )
    return arrival_order(workload, files, size.epochs)


def arrival_order(workload: str, files: dict[tuple[str, int, int], Step], epochs: int) -> Feed:
    """``sum``: worker 0 then worker 1, epoch by epoch. ``join``: orders and payments' worker 0
    deliver epoch e, then payments' worker 1 delivers epoch e - 1 (the late worker)."""
    order: list[tuple[str, int, int]] = []
    if workload == "sum":
        workers = {"moves": 2}
        for e in range(epochs):
            order += [("moves", 0, e), ("moves", 1, e)]
    else:
        workers = {"orders": 1, "payments": 2}
        for e in range(epochs):
            order += [("orders", 0, e), ("payments", 0, e)]
            if e > 0:
                order.append(("payments", 1, e - 1))
        order.append(("payments", 1, epochs - 1))
    steps = tuple(files[k] for k in order)
    closes: dict[int, int] = {}
    pending = {e: sum(workers.values()) for e in range(epochs)}
    for i, step in enumerate(steps):
        pending[step.epoch] -= 1
        if pending[step.epoch] == 0:
            closes[step.epoch] = i + 1
    return Feed(workload, steps, workers, closes)


# -- the oracle ------------------------------------------------------------------------------

COLUMNS = {
    "sum": ("epoch", "account", "total"),
    "join": ("epoch", "customer", "n", "cents", "paid"),
}
"""The output of each workload, as every tool writes it (one Parquet file, all epochs)."""


def _inputs(root: Path, workload: str, source: str) -> str:
    glob = root / workload / source / "*" / "*.parquet"
    return f"read_parquet('{glob}', hive_partitioning = true)"


def oracle_sql(root: Path, workload: str) -> str:
    """The expected output of every epoch, in plain DuckDB SQL over the raw input files."""
    if workload == "sum":
        return f"""
            SELECT epoch, account,
                   SUM(SUM(amount)) OVER (PARTITION BY account ORDER BY epoch)::BIGINT AS total
            FROM {_inputs(root, workload, "moves")} GROUP BY epoch, account"""
    return f"""
        SELECT o.epoch, o.customer, COUNT(*)::BIGINT AS n, SUM(o.cents)::BIGINT AS cents,
               SUM(p.paid)::BIGINT AS paid
        FROM {_inputs(root, workload, "orders")} o
        JOIN {_inputs(root, workload, "payments")} p
          ON o.epoch = p.epoch AND o.order_id = p.order_id AND o.customer = p.customer
        GROUP BY o.epoch, o.customer"""


def wrong_epochs(root: Path, workload: str, output: Path) -> list[int]:
    """The epochs whose rows in ``output`` differ from the oracle's (a missing epoch too)."""
    cols = ", ".join(COLUMNS[workload])
    got = f"SELECT {cols} FROM read_parquet('{output}')"
    want = f"SELECT {cols} FROM ({oracle_sql(root, workload)})"
    con = duckdb.connect()
    try:
        rows = con.sql(f"""
            SELECT DISTINCT epoch FROM (
                ({got} EXCEPT ALL {want}) UNION ALL ({want} EXCEPT ALL {got}))
            ORDER BY epoch""").fetchall()
    finally:
        con.close()
    return [int(r[0]) for r in rows]
