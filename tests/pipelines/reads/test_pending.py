"""Pending upqueries: a read of a partial stage as of an epoch it has not processed is recorded,
named in its error, and filled once the stage has processed the epoch; the answer equals DuckDB
SQL over the rows sent."""

from __future__ import annotations

import datetime
import decimal

import duckdb
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import types as T

from pipelines import Pipeline
from pipelines.errors import ReadPendingError, StageNotReadyError, StateReadError
from pipelines.reads.pending import decode_key, encode_key
from pipelines.testing import send_rows, throwaway_runtime

pytestmark = [pytest.mark.spark, pytest.mark.ledger]

MOVES = T.StructType([T.StructField("account", T.LongType()), T.StructField("cents", T.LongType())])
AGGS = {"total": ("sum", "cents"), "n": ("count", None)}
SENT = {  # (epoch, worker): rows
    (0, 0): [(1, 5), (2, 7)],
    (0, 1): [(1, 3), (4, 9)],
    (1, 0): [(2, -1), (3, 4)],
    (1, 1): [(1, 10), (3, 1)],  # the late worker's epoch 1
}


def pipeline() -> Pipeline:
    p = Pipeline("ledgerbook")
    moves = p.source("moves", schema=MOVES, workers=2, key=[])
    p.aggregate("sums", moves, key=["account"], aggs=AGGS, partial=True)
    p.aggregate("sums_full", moves, key=["account"], aggs=AGGS)
    return p


def expected(accounts: list[int], epoch: int) -> list[dict[str, int]]:
    con = duckdb.connect()
    rows = [(e, a, c) for (e, _), sent in SENT.items() for a, c in sent]
    con.execute("CREATE TABLE moves (epoch BIGINT, account BIGINT, cents BIGINT)")
    con.executemany("INSERT INTO moves VALUES (?, ?, ?)", rows)
    found = con.execute(
        "SELECT account, sum(cents), count(*) FROM moves WHERE epoch <= ? "
        "AND list_contains(?, account) GROUP BY account ORDER BY account",
        [epoch, accounts],
    ).fetchall()
    return [{"account": a, "total": t, "n": n} for a, t, n in found]


def test_a_read_of_an_epoch_not_processed_is_pending_until_the_stage_processes_it(
    spark: SparkSession,
) -> None:
    with throwaway_runtime(pipeline(), spark) as rt:
        for w in (0, 1):
            send_rows(rt, "moves", SENT[0, w], worker=w)
            rt.input("moves", w).advance_to(1)
        send_rows(rt, "moves", SENT[1, 0], worker=0)
        rt.input("moves", 0).advance_to(2)
        rt.run()  # epoch 0 done; worker 1 holds epoch 1
        reads = rt.pending_reads

        with pytest.raises(ReadPendingError) as err:
            reads.lookup_or_request("sums", [1, 2], as_of=1)
        assert (err.value.stage, err.value.epoch, err.value.keys) == ("sums", 1, (1, 2))
        assert str(err.value) == (
            "stage 'sums' is not ready for epoch 1: source moves, worker 1, still holds epoch 1; "
            "the read is recorded as a pending upquery of sums: it is filled once sums has "
            "processed epoch 1"
        )
        again = rt.request("sums", [2, 3], 1)  # 2 is pending already
        assert [decode_key(r.key) for r in again] == [(2,), (3,)]
        assert len(rt.ledger.pending_upqueries("ledgerbook", "sums")) == 3

        # A full stage waits for its epoch instead; bad keys and epochs record nothing.
        with pytest.raises(StageNotReadyError) as full:
            reads.lookup_or_request("sums_full", [1], as_of=1)
        assert not isinstance(full.value, ReadPendingError)
        with pytest.raises(StateReadError, match="a full stage keeps every key"):
            rt.request("sums_full", [1], 1)
        with pytest.raises(StateReadError, match="key column 'account' is bigint: 'x' is not"):
            rt.request("sums", [4, "x"], 1)
        with pytest.raises(StateReadError, match="as_of must be an epoch"):
            rt.request("sums", [4], -1)
        assert len(rt.ledger.pending_upqueries("ledgerbook")) == 3

        waiting = reads.status("sums")
        assert (waiting.last_epoch, waiting.ready) == (0, ())
        assert waiting.waiting_lines() == [
            "3 pending read(s) of sums as of epoch 1 wait: "
            "source moves, worker 1, still holds epoch 1"
        ]
        assert reads.fill("sums").reads == ()  # nothing it can answer yet

        send_rows(rt, "moves", SENT[1, 1], worker=1)
        rt.input("moves", 1).advance_to(2)
        rt.run()
        ready = reads.status("sums")
        assert (ready.last_epoch, len(ready.ready), ready.waiting) == (1, 3, {})
        filled = reads.fill("sums")
        assert [decode_key(r.key) for r in filled.reads] == [(1,), (2,), (3,)]
        assert filled.upqueried == 3
        assert rt.ledger.pending_upqueries("ledgerbook") == []

        answer = rt.lookup("sums", [1, 2, 3], as_of=1)
        assert answer.hits == [1, 2, 3]
        assert answer.upqueried == []
        assert answer.rows == expected([1, 2, 3], 1)
        assert rt.lookup("sums", [1, 2], as_of=0).rows == expected([1, 2], 0)


def test_keys_of_every_kind_read_back_as_they_were_given() -> None:
    key = (7, 'O\'Neil "x"', datetime.date(2026, 11, 21), decimal.Decimal("1.50"))
    key += (datetime.datetime(2026, 11, 21, 8, 10), True, 2.5)
    assert decode_key(encode_key(key)) == key
