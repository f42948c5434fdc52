"""Small pipelines for the partial-state tests, their raw input files, and a DuckDB-SQL oracle.

Every source has the schema ``MOVES``: an account, a sign (+1 a write, -1 the delete of an
earlier one) and a signed amount (a delete carries minus the amount it takes back). Two keyed
kinds read it: ``fold`` (a stateful fold: the balance and the net number of rows) and
``AGGS`` (an aggregate: the same two, the moves counted, the lowest and highest amount). Rows
are written with pyarrow as raw Parquet files, sent by path, and remembered per source, worker
and epoch; ``Oracle`` answers every read with plain DuckDB SQL over those same files.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines import PartialState, Pipeline
from pipelines.carry import StateUpdate
from pipelines.runtime import Runtime

MOVES = T.StructType(
    [
        T.StructField("account", T.LongType()),
        T.StructField("sign", T.LongType()),
        T.StructField("amount", T.LongType()),
    ]
)
ARROW = pa.schema([("account", pa.int64()), ("sign", pa.int64()), ("amount", pa.int64())])
BALANCES = T.StructType(
    [
        T.StructField("account", T.LongType()),
        T.StructField("balance", T.LongType()),
        T.StructField("n", T.LongType()),
    ]
)
AGGS: dict[str, tuple[str, str | None]] = {
    "total": ("sum", "amount"),
    "net": ("sum", "sign"),
    "moves": ("count", None),
    "low": ("min", "amount"),
    "high": ("max", "amount"),
}
BRANCHES = T.StructType(
    [T.StructField("account", T.LongType()), T.StructField("branch", T.StringType())]
)
BRANCHES_ARROW = pa.schema([("account", pa.int64()), ("branch", pa.string())])
PEAKS = T.StructType(
    [
        T.StructField("account", T.LongType()),
        T.StructField("peak", T.LongType()),
        T.StructField("epochs", T.LongType()),
    ]
)

Move = tuple[int, int, int]
"""(account, sign, amount)."""


def fold(batch: DataFrame, state: DataFrame) -> DataFrame:
    """The balance and the net number of rows of each account the batch moved."""
    moved = batch.groupBy("account").agg(F.sum("amount").alias("d"), F.sum("sign").alias("s"))
    return moved.join(state, "account", "left").select(
        "account",
        (F.coalesce(F.col("balance"), F.lit(0)) + F.col("d")).alias("balance"),
        (F.coalesce(F.col("n"), F.lit(0)) + F.col("s")).alias("n"),
    )


def peak(batch: DataFrame, state: DataFrame) -> DataFrame:
    """Over an aggregate's output: the highest running total seen, and the epochs it moved."""
    return (
        batch.select("account", "total")
        .join(state, "account", "left")
        .select(
            "account",
            F.greatest(F.coalesce(F.col("peak"), F.col("total")), F.col("total")).alias("peak"),
            (F.coalesce(F.col("epochs"), F.lit(0)) + 1).alias("epochs"),
        )
    )


def ledger_pipeline(
    name: str = "ledger", *, workers: int = 1, partial: bool = True, update: StateUpdate = fold
) -> Pipeline:
    """``moves`` (``workers`` workers) read by a fold ``balances`` (``update``) and an
    aggregate ``totals``, both partial (or both full)."""
    p = Pipeline(name)
    moves = p.source("moves", schema=MOVES, workers=workers)
    p.stateful("balances", moves, key=["account"], schema=BALANCES, update=update, partial=partial)
    p.aggregate("totals", moves, key=["account"], aggs=AGGS, partial=partial)
    return p


def chain_pipeline(name: str = "chain", *, budget: int | None = None) -> Pipeline:
    """Sources ``cards`` and ``wires``, their union ``moves``, the partial aggregate
    ``totals`` (at most ``budget`` keys, if given) and the partial fold ``peaks`` below it."""
    p = Pipeline(name)
    cards = p.source("cards", schema=MOVES)
    wires = p.source("wires", schema=MOVES)
    moves = p.union("moves", cards, wires)
    partial = PartialState(max_keys=budget) if budget is not None else True
    totals = p.aggregate("totals", moves, key=["account"], aggs=AGGS, partial=partial)
    p.stateful("peaks", totals, key=["account"], schema=PEAKS, update=peak, partial=True)
    return p


def branch_pipeline(name: str = "branch") -> Pipeline:
    """``moves`` joined with the dimension ``branches``, read by the partial aggregate
    ``per_branch``; and the partial aggregate ``totals`` of ``moves``."""
    p = Pipeline(name)
    moves = p.source("moves", schema=MOVES)
    branches = p.dimension("branches", schema=BRANCHES)
    tagged = p.join("tagged", moves, branches, on=["account"])
    p.aggregate(
        "per_branch",
        tagged,
        key=["branch"],
        aggs={"total": ("sum", "amount"), "moves": ("count", None)},
        partial=True,
    )
    p.aggregate("totals", moves, key=["account"], aggs=AGGS, partial=True)
    return p


def writes(epoch: int, *accounts: int, amount: int = 0) -> list[Move]:
    """One write per account, of an amount that tells epoch and account apart."""
    return [(a, 1, amount or 100 * (epoch + 1) + a) for a in accounts]


class Raw:
    """Raw input files of a runtime's sources: written, sent and remembered for the oracle."""

    def __init__(self, rt: Runtime, root: Path) -> None:
        self.rt = rt
        self.root = root
        self.files: dict[tuple[str, int, int], list[Path]] = {}
        self.tables: dict[int, Path] = {}
        self._names = itertools.count()

    def _write(
        self,
        source: str,
        worker: int,
        epoch: int,
        rows: Sequence[Sequence[Any]],
        schema: pa.Schema = ARROW,
    ) -> Path:
        path = self.root / source / f"w{worker}-e{epoch}-{next(self._names)}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        columns: list[Sequence[Any]] = (
            list(zip(*rows, strict=True)) if rows else [[] for _ in schema.names]
        )
        table = pa.table({n: list(c) for n, c in zip(schema.names, columns, strict=True)}, schema)
        pq.write_table(table, path)
        return path

    def table(self, source: str, epoch: int, rows: Sequence[tuple[int, str]]) -> None:
        """Send a ``BRANCHES`` table from the dimension ``source`` at ``epoch``."""
        handle = self.rt.input(source, 0)
        if handle.epoch != epoch:
            handle.advance_to(epoch)
        path = self._write(source, 0, epoch, rows, BRANCHES_ARROW)
        handle.send(path)
        self.tables[epoch] = path

    def send(
        self, source: str, epoch: int, rows: Sequence[Sequence[Any]], *, worker: int = 0
    ) -> None:
        """Send ``rows`` from ``source``'s ``worker`` at ``epoch`` (advancing it there first)."""
        handle = self.rt.input(source, worker)
        if handle.epoch != epoch:
            handle.advance_to(epoch)
        path = self._write(source, worker, epoch, rows)
        handle.send(path)
        self.files.setdefault((source, worker, epoch), []).append(path)

    def epochs(
        self, source: str, epochs: Mapping[int, Sequence[Sequence[Any]]], *, worker: int = 0
    ) -> None:
        """Send each epoch's rows in order, then advance the worker past the last."""
        for epoch in sorted(epochs):
            self.send(source, epoch, epochs[epoch], worker=worker)
        self.rt.input(source, worker).advance_to(max(epochs) + 1)

    def correct(
        self, source: str, epoch: int, rows: Sequence[Sequence[Any]], *, worker: int = 0
    ) -> None:
        """Replace the worker's messages at ``epoch`` with ``rows`` (a correction)."""
        path = self._write(source, worker, epoch, rows)
        self.rt.input(source, worker).correct(epoch, path)
        self.files[(source, worker, epoch)] = [path]

    def oracle(self, *sources: str) -> Oracle:
        """The oracle of every file sent so far (of ``sources`` only, when given)."""
        files = {k: v for k, v in self.files.items() if not sources or k[0] in sources}
        return Oracle(files, self.tables)


class Oracle:
    """Expected reads, in DuckDB SQL over the raw files (never through epochgate)."""

    def __init__(
        self,
        files: Mapping[tuple[str, int, int], Sequence[Path]],
        tables: Mapping[int, Path] | None = None,
    ) -> None:
        self.con = duckdb.connect()
        self.con.execute("CREATE TABLE branches (since BIGINT, account BIGINT, branch VARCHAR)")
        for since, path in (tables or {}).items():
            self.con.execute(
                "INSERT INTO branches SELECT ?, account, branch FROM read_parquet(?)",
                [since, str(path)],
            )
        self.con.execute(
            "CREATE TABLE raw (epoch BIGINT, account BIGINT, sign BIGINT, amount BIGINT)"
        )
        for (_, _, epoch), paths in files.items():
            for path in paths:
                self.con.execute(
                    "INSERT INTO raw SELECT ?, account, sign, amount FROM read_parquet(?)",
                    [epoch, str(path)],
                )

    def _rows(self, sql: str, params: Sequence[Any]) -> list[dict[str, Any]]:
        cursor = self.con.execute(sql, list(params))
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    def balances(self, as_of: int, keys: Sequence[int]) -> list[dict[str, Any]]:
        """The fold's rows of ``keys`` after ``as_of``, in the order asked (none for a key
        with no input)."""
        found = self._rows(
            "SELECT account, sum(amount) AS balance, sum(sign) AS n FROM raw "
            "WHERE epoch <= ? GROUP BY account",
            [as_of],
        )
        return _ordered(found, keys)

    def totals(self, as_of: int, keys: Sequence[int]) -> list[dict[str, Any]]:
        """The aggregate's rows of ``keys`` after ``as_of``, in the order asked."""
        found = self._rows(
            "SELECT account, sum(amount) AS total, sum(sign) AS net, count(*) AS moves, "
            "min(amount) AS low, max(amount) AS high FROM raw WHERE epoch <= ? "
            "GROUP BY account",
            [as_of],
        )
        return _ordered(found, keys)

    def peaks(self, as_of: int, keys: Sequence[int]) -> list[dict[str, Any]]:
        """``peak`` over the aggregate's output: the highest running total after an epoch
        that moved the account, and how many epochs moved it."""
        found = self._rows(
            "WITH per AS (SELECT account, epoch, sum(amount) AS s FROM raw WHERE epoch <= ? "
            "GROUP BY account, epoch), running AS (SELECT account, sum(s) OVER (PARTITION BY "
            "account ORDER BY epoch) AS total FROM per) "
            "SELECT account, max(total) AS peak, count(*) AS epochs FROM running "
            "GROUP BY account",
            [as_of],
        )
        return _ordered(found, keys)

    def per_branch(self, as_of: int, keys: Sequence[str]) -> list[dict[str, Any]]:
        """The aggregate of moves joined with the branch table as of each move's epoch."""
        found = self._rows(
            "WITH m AS (SELECT r.*, (SELECT max(since) FROM branches WHERE since <= r.epoch) "
            "AS at FROM raw r WHERE r.epoch <= ?) SELECT b.branch, sum(m.amount) AS total, "
            "count(*) AS moves FROM m JOIN branches b ON b.since = m.at AND b.account = "
            "m.account GROUP BY b.branch",
            [as_of],
        )
        by_key = {row["branch"]: row for row in found}
        return [by_key[k] for k in keys if k in by_key]


def _ordered(found: list[dict[str, Any]], keys: Sequence[int]) -> list[dict[str, Any]]:
    by_key = {row["account"]: row for row in found}
    return [by_key[k] for k in keys if k in by_key]
