"""A loop through a feedback stage: it runs before the loop has carried anything (its columns
come from the stages' functions over empty inputs), carries rows one epoch on, and ends once
nothing comes round, checked against DuckDB SQL over the raw input."""

from __future__ import annotations

import duckdb
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines import Pipeline
from pipelines.errors import RunFailedError
from pipelines.testing import assert_output, close_sources, frame, send_epochs, throwaway_runtime

pytestmark = pytest.mark.spark

ORDERS = T.StructType(
    [
        T.StructField("order_id", T.LongType()),
        T.StructField("category", T.StringType()),
        T.StructField("cents", T.LongType()),
    ]
)
SENT = {
    0: [(1, "books", 900), (2, "backorder", 300)],
    2: [(3, "backorder", 50), (4, "toys", 10)],
}


def restock(df: DataFrame) -> DataFrame:
    """A backorder comes back restocked; a restocked order does not come back again."""
    return df.where(F.col("category") == "backorder").withColumn("category", F.lit("restocked"))


def loop() -> Pipeline:
    p = Pipeline("loop")
    orders = p.source("orders", schema=ORDERS, key=["order_id"])
    back = p.feedback("restocked", delay=1)
    queue = p.union("queue", orders, back)
    p.connect(back, p.transform("backorders", queue, fn=restock))
    return p


def oracle(epoch: int) -> list[tuple[object, ...]]:
    """The queue at ``epoch``: what was sent then, and the backorders of the epoch before."""
    con = duckdb.connect()
    con.execute("CREATE TABLE sent (epoch INT, order_id BIGINT, category VARCHAR, cents BIGINT)")
    for e, rows in SENT.items():
        con.executemany("INSERT INTO sent VALUES (?, ?, ?, ?)", [(e, *r) for r in rows])
    return con.execute(
        "SELECT order_id, category, cents FROM sent WHERE epoch = ? UNION ALL "
        "SELECT order_id, 'restocked', cents FROM sent WHERE epoch = ? AND category = 'backorder'",
        [epoch, epoch - 1],
    ).fetchall()


def test_a_loop_carries_rows_on_and_ends_when_nothing_comes_round(spark: SparkSession) -> None:
    with throwaway_runtime(loop(), spark) as rt:
        send_epochs(rt, "orders", SENT)
        close_sources(rt)
        rt.run()  # returns: the loop stops once the feedback carries nothing
        done = {s.stage: s.done for s in rt.status()}
        assert done["queue"] == (0, 1, 2, 3)  # 1 and 3: only what came round
        assert done["restocked"] == (0, 1, 2, 3)
        for epoch in range(4):
            assert_output(rt, "queue", epoch, oracle(epoch))
        # Nothing carried to 4: a message with no data, not counted (no run at 4 waits on it).
        assert [(m.path, m.rows) for m in rt.ledger.message("loop", "restocked", 0, 4)] == [
            (None, 0)
        ]
        assert rt.pending() == []


def test_a_correction_that_sends_a_backorder_round_reaches_the_next_epoch(
    spark: SparkSession,
) -> None:
    """Epoch 0 first has no backorder: nothing comes round to 1, where the queue runs on what
    came from outside. The correction adds a backorder at 0: the feedback at 0 read what the
    correction replaced, so it is revised, and carries the backorder round; the queue at 1
    read its empty message, so it is revised too, with the backorder restocked."""
    sent = {0: [(1, "books", 900)], 1: [(5, "toys", 10)]}
    with throwaway_runtime(loop(), spark) as rt:
        send_epochs(rt, "orders", sent)
        close_sources(rt)
        rt.run()
        assert_output(rt, "queue", 1, [(5, "toys", 10)])
        rt.input("orders").correct(
            0, frame(rt, "orders", [(1, "books", 900), (2, "backorder", 300)])
        )
        rt.run()
        assert_output(rt, "queue", 1, [(5, "toys", 10), (2, "restocked", 300)])
        assert rt.stale() == []
        assert rt.pending() == []


def test_a_backorder_a_correction_sends_round_waits_for_the_loops_next_run(
    spark: SparkSession,
) -> None:
    """The orders worker still holds epoch 1 when epoch 0 is corrected: the loop has not run
    1 yet, so the revised feedback's backorder is read by that run when it comes."""
    with throwaway_runtime(loop(), spark) as rt:
        send_epochs(rt, "orders", {0: [(1, "books", 900)]})
        rt.run()
        rt.input("orders").correct(
            0, frame(rt, "orders", [(1, "books", 900), (2, "backorder", 300)])
        )
        rt.run()  # no failure: the revision's row waits for epoch 1
        assert rt.stale() == []
        send_epochs(rt, "orders", {1: [(5, "toys", 10)]})
        close_sources(rt)
        rt.run()
        assert_output(rt, "queue", 1, [(5, "toys", 10), (2, "restocked", 300)])
        assert rt.stale() == []


def test_a_revision_that_would_send_rows_round_to_an_epoch_the_loop_passed_is_refused(
    spark: SparkSession,
) -> None:
    """Nothing came round to epoch 1 and nothing came from outside: the loop never ran there,
    so a backorder a correction adds at 0 would reach no run. Refused, naming the stage, the
    epoch and why; the rest of the revision stands."""
    with throwaway_runtime(loop(), spark) as rt:
        send_epochs(rt, "orders", {0: [(1, "books", 900)]})
        close_sources(rt)
        rt.run()
        rt.input("orders").correct(
            0, frame(rt, "orders", [(1, "books", 900), (2, "backorder", 300)])
        )
        with pytest.raises(RunFailedError) as err:
            rt.run()
        (failure,) = err.value.failures
        assert (failure.stage, failure.epoch) == ("restocked", 0)
        assert failure.cause == (
            "this revision carries 1 row(s) round into epoch 1, which the loop passed without "
            "running (nothing came round to it before, and nothing from outside): not supported "
            "yet (a loop cannot take new work at an epoch it has passed)"
        )
        assert_output(rt, "queue", 0, [(1, "books", 900), (2, "backorder", 300)])
        assert rt.stale() == [("restocked", 0)]
