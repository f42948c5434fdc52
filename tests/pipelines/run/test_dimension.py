"""Dimension sources: a stream of orders joined with a table of accounts that changes rarely.

Every stage that reads the dimension at epoch e sees, per worker, its latest message with data
at or before e; the outputs are checked against plain DuckDB SQL over the raw rows sent, with
"the latest table as of the epoch" written as SQL. Readiness is a source's: a reader at e waits
until the dimension's workers have passed e.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import duckdb
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines import Pipeline, Runtime
from pipelines.errors import InputValidationError
from pipelines.run.storage import new_attempt
from pipelines.testing import assert_output, frame, send_rows, throwaway_runtime
from progress.ledger import MessageEntry, MessageRef, Origin

pytestmark = pytest.mark.spark

ORDERS = T.StructType(
    [
        T.StructField("order_id", T.LongType()),
        T.StructField("account", T.StringType()),
        T.StructField("amount", T.DoubleType()),
    ]
)
ACCOUNTS = T.StructType(
    [T.StructField("account", T.StringType()), T.StructField("tier", T.StringType())]
)
JOINED = ["account", "order_id", "amount", "tier"]
EPOCHS = range(7)


def tier_sizes(df: DataFrame) -> DataFrame:
    return df.groupBy("tier").agg(F.count("*").alias("accounts"))


def desk(workers: int, readers: Sequence[str]) -> Pipeline:
    """Orders joined with the ``accounts`` dimension, and the other ``readers`` of it."""
    p = Pipeline("desk")
    orders = p.source("orders", schema=ORDERS, key=["order_id"])
    signups = p.source("signups", schema=ACCOUNTS, key=["account"])
    accounts = p.dimension("accounts", schema=ACCOUNTS, workers=workers, key=["account"])
    p.join("orders_by_tier", orders, accounts, on=["account"])
    if "tier_sizes" in readers:  # it runs at the epochs where the dimension has a message
        p.transform("tier_sizes", accounts, fn=tier_sizes)
    if "known_accounts" in readers:
        p.union("known_accounts", signups, accounts)
    return p


class Desk:
    """Sends rows to the pipeline and keeps every row sent, for the DuckDB oracle."""

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        self.con = duckdb.connect()
        self.con.execute(
            "CREATE TABLE orders (epoch INT, order_id BIGINT, account VARCHAR, amount DOUBLE);"
            "CREATE TABLE signups (epoch INT, account VARCHAR, tier VARCHAR);"
            "CREATE TABLE sends (worker INT, epoch INT);"
            "CREATE TABLE accounts (worker INT, epoch INT, account VARCHAR, tier VARCHAR);"
        )

    def streams(self) -> None:
        """Orders and signups at every epoch, then both sources closed."""
        for epoch in EPOCHS:
            orders = [(epoch * 10 + i, a, float(epoch + i)) for i, a in enumerate(NAMES)]
            self.send("orders", epoch, orders)
            self.send("signups", epoch, [(f"new{epoch}", "bronze")])
        for source in ("orders", "signups"):
            self.rt.input(source).close()

    def send(self, source: str, epoch: int, rows: Sequence[tuple[Any, ...]]) -> None:
        """Send ``rows`` to the stream ``source`` at ``epoch`` (its worker advanced there)."""
        handle = self.rt.input(source)
        if handle.epoch != epoch:
            handle.advance_to(epoch)
        send_rows(self.rt, source, rows)
        self.con.executemany(
            f"INSERT INTO {source} VALUES ({epoch}, ?, ?{', ?' * (len(rows[0]) - 2)})", rows
        )

    def table(self, worker: int, epoch: int, rows: Sequence[tuple[str, str]]) -> None:
        """Send ``rows`` (possibly none) as worker ``worker``'s table from ``epoch`` on."""
        handle = self.rt.input("accounts", worker)
        if handle.epoch != epoch:
            handle.advance_to(epoch)  # the epochs it passes are sealed empty
        send_rows(self.rt, "accounts", rows, worker=worker)
        self.con.execute("INSERT INTO sends VALUES (?, ?)", [worker, epoch])
        self._rows(worker, epoch, rows)

    def _rows(self, worker: int, epoch: int, rows: Sequence[tuple[str, str]]) -> None:
        for account, tier in rows:
            self.con.execute(
                "INSERT INTO accounts VALUES (?, ?, ?, ?)", [worker, epoch, account, tier]
            )

    def correct(self, worker: int, epoch: int, rows: Sequence[tuple[str, str]]) -> None:
        """Replace what ``worker`` sent at ``epoch`` (a re-delivered file): a new attempt becomes
        the current message there, the old one stays in the history."""
        rt, p = self.rt, self.rt.pipeline.name
        attempt = new_attempt()
        path = rt.store.attempt_dir(p, "accounts", 0, epoch, attempt)
        frame(rt, "accounts", rows).write.parquet(str(path))
        count, size = rt.store.stats(path)
        entry = MessageEntry("accounts", 0, epoch, attempt, str(path), count, size, replaces=True)
        key = f"correct:accounts:{worker}:{epoch}:{attempt}"
        rt.ledger.commit(p, [], key=key, messages=[entry], origin=Origin.input("accounts", worker))
        self.corrected(worker, epoch, rows)

    def corrected(self, worker: int, epoch: int, rows: Sequence[tuple[str, str]]) -> None:
        """The oracle's rows after ``worker``'s table at ``epoch`` was replaced by ``rows``."""
        self.con.execute("DELETE FROM accounts WHERE worker = ? AND epoch = ?", [worker, epoch])
        self._rows(worker, epoch, rows)

    # -- the oracle ----------------------------------------------------------------------------

    def expected(self, stage: str, epoch: int) -> list[tuple[Any, ...]]:
        """``stage``'s output at ``epoch`` in DuckDB SQL over the rows sent."""
        as_of = f"""
            WITH latest AS (
                SELECT worker, max(epoch) AS epoch FROM sends WHERE epoch <= {epoch}
                GROUP BY worker
            )
            SELECT account, tier FROM accounts JOIN latest USING (worker, epoch)
        """
        queries = {
            "accounts": as_of,
            "orders_by_tier": f"SELECT o.account, order_id, amount, tier FROM orders o "
            f"JOIN ({as_of}) t ON o.account = t.account WHERE o.epoch = {epoch}",
            "tier_sizes": f"SELECT tier, count(*) FROM ({as_of}) GROUP BY tier",
            "known_accounts": f"SELECT account, tier FROM signups WHERE epoch = {epoch} "
            f"UNION ALL SELECT * FROM ({as_of})",
        }
        return self.con.execute(queries[stage]).fetchall()

    def check(self, stage: str, epochs: Sequence[int]) -> None:
        columns = JOINED if stage == "orders_by_tier" else None
        for epoch in epochs:
            assert_output(self.rt, stage, epoch, self.expected(stage, epoch), columns=columns)


NAMES = ["a1", "a2", "a3", "b1", "b2", "zz"]


@pytest.fixture
def one_worker(spark: SparkSession) -> Iterator[Desk]:
    with throwaway_runtime(desk(1, ["tier_sizes"]), spark) as rt:
        yield Desk(rt)


@pytest.fixture
def two_workers(spark: SparkSession) -> Iterator[Desk]:
    with throwaway_runtime(desk(2, ["known_accounts"]), spark) as rt:
        yield Desk(rt)


def test_a_reader_sees_the_table_as_of_its_epoch_and_after_close_the_last(
    one_worker: Desk,
) -> None:
    desk_, rt = one_worker, one_worker.rt
    desk_.streams()
    desk_.table(0, 0, [("a1", "gold"), ("a2", "silver")])
    desk_.table(0, 3, [("a1", "silver"), ("a2", "gold"), ("a3", "gold")])  # replaces it
    rt.run()
    # Epochs 1 and 2 were sealed empty: they kept epoch 0's table. Epoch 3 waits: the
    # dimension's worker is still at 3 and could send more there.
    desk_.check("orders_by_tier", [0, 1, 2])
    desk_.check("tier_sizes", [0, 1, 2])
    assert ("orders_by_tier", 3) not in rt.ready()
    holds = [h.text for h in rt.ledger.blockers("desk", "orders_by_tier", 3)]
    assert holds == ["source accounts, worker 0, still holds epoch 3"]

    rt.input("accounts").close()  # nothing seals the epochs after 3: the table stays
    rt.run()
    desk_.check("orders_by_tier", EPOCHS)
    desk_.check("accounts", EPOCHS)  # read as a reader at each epoch sees it
    desk_.check("tier_sizes", [0, 1, 2, 3])
    assert rt.ledger.done_epochs("desk", "tier_sizes") == [0, 1, 2, 3]
    (table,) = rt.ledger.message("desk", "accounts", 0, 3)
    assert [r for r in rt.ledger.reads("desk", "orders_by_tier", 6) if r.stage == "accounts"] == [
        MessageRef("accounts", 0, 3, table.attempt)
    ]

    # A correction of the table sent at 3 makes exactly the runs that read it stale.
    desk_.correct(0, 3, [("a1", "bronze"), ("a3", "silver")])
    assert sorted(rt.stale()) == sorted(
        [("orders_by_tier", e) for e in (3, 4, 5, 6)] + [("tier_sizes", 3)]
    )
    rt.run()
    assert rt.stale() == []
    desk_.check("orders_by_tier", EPOCHS)
    desk_.check("tier_sizes", [0, 1, 2, 3])

    desk_.correct(0, 0, [("a2", "bronze")])
    assert sorted(rt.stale()) == sorted(
        [("orders_by_tier", e) for e in (0, 1, 2)] + [("tier_sizes", e) for e in (0, 1, 2)]
    )


def test_several_workers_tables_are_one_and_an_empty_frame_empties_one(two_workers: Desk) -> None:
    desk_, rt = two_workers, two_workers.rt
    desk_.streams()
    desk_.table(0, 0, [("a1", "gold"), ("a2", "silver")])
    desk_.table(1, 0, [("b1", "gold")])
    desk_.table(1, 2, [])  # an empty frame: worker 1's table is empty from epoch 2 on
    desk_.table(0, 3, [("a1", "silver"), ("a3", "gold")])
    desk_.table(1, 4, [("b1", "bronze"), ("b2", "gold")])
    rt.input("accounts", 0).close()
    rt.input("accounts", 1).advance_to(6)  # 5 sealed empty: worker 1's table stays
    rt.run()
    assert rt.ledger.done_epochs("desk", "orders_by_tier") == [0, 1, 2, 3, 4, 5]  # 6 waits
    rt.input("accounts", 1).close()
    rt.run()
    for stage in ("orders_by_tier", "known_accounts", "accounts"):
        desk_.check(stage, EPOCHS)
    assert desk_.expected("accounts", 2) == [("a1", "gold"), ("a2", "silver")]  # the oracle too


def test_a_dimension_is_corrected_only_where_its_worker_sent_a_table(spark: SparkSession) -> None:
    """Its readers after a sealed epoch read an earlier table, so adding one there would leave
    them unaware: refused, nothing committed. Where it sent one, the correction re-runs them."""
    with throwaway_runtime(desk(1, ()), spark) as rt:
        desk_ = Desk(rt)
        desk_.table(0, 0, [("ann", "gold")])
        rt.input("accounts").advance_to(3)
        desk_.send("orders", 0, [(1, "ann", 5.0)])
        desk_.send("orders", 2, [(2, "ann", 7.0)])
        for source in ("orders", "signups", "accounts"):
            rt.input(source).close()
        rt.run()
        desk_.check("orders_by_tier", [0, 1, 2])
        assert desk_.expected("orders_by_tier", 2) == [("ann", 2, 7.0, "gold")]  # the oracle too
        batches = len(rt.ledger.history("desk", "accounts", 2).batches)
        with pytest.raises(InputValidationError, match="only an epoch it sent a table at"):
            rt.input("accounts").correct(2, frame(rt, "accounts", [("ann", "silver")]))
        assert len(rt.ledger.history("desk", "accounts", 2).batches) == batches
        assert rt.stale() == []
        rt.input("accounts").correct(0, frame(rt, "accounts", [("ann", "silver")]))
        desk_.corrected(0, 0, [("ann", "silver")])
        assert rt.stale() == [("orders_by_tier", e) for e in (0, 1, 2)]  # 1: sealed, ran too
        rt.run()
        desk_.check("orders_by_tier", [0, 1, 2])
        assert desk_.expected("orders_by_tier", 2) == [("ann", 2, 7.0, "silver")]
