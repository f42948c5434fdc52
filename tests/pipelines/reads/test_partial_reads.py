"""Reads of partial stages: holes filled by upqueries, writes to holes dropped and counted once
after the fill, evictions and re-reads, reads as of earlier epochs, and the state's counters.

Every expected row comes from ``Oracle`` (DuckDB SQL over the raw input files). Each scenario
runs on ``ledger_pipeline``: a partial stateful fold ``balances`` and a partial aggregate
``totals`` over one source.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import duckdb
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines.errors import StateReadError
from pipelines.reads.lookup import KeyedReads
from pipelines.run.runtime import Runtime
from pipelines.stages.pipeline import Pipeline
from pipelines.testing import rows_of, send_epochs, throwaway_runtime
from progress.ledger import Ledger
from state_store import KeyedState
from tests.fixtures.partials import Oracle, Raw, ledger_pipeline, writes

pytestmark = pytest.mark.spark

Expected = Callable[[Oracle], Callable[[int, Sequence[int]], list[dict[str, Any]]]]
KINDS: list[tuple[str, Expected]] = [
    ("balances", lambda o: o.balances),
    ("totals", lambda o: o.totals),
]


def runtime(tmp_path: Path, spark: SparkSession) -> tuple[Runtime, Raw]:
    rt = Runtime(ledger_pipeline(), Ledger(tmp_path / "ledger.duckdb"), spark, tmp_path / "data")
    return rt, Raw(rt, tmp_path / "raw")


def test_a_never_read_key_is_upqueried_then_answered_from_state(
    tmp_path: Path, spark: SparkSession
) -> None:
    rt, raw = runtime(tmp_path, spark)
    with pytest.raises(StateReadError, match="a source stage keeps no keyed state"):
        rt.lookup("moves", [1])
    with pytest.raises(StateReadError, match=r"key column 'account' is bigint: 'a' is not"):
        rt.lookup("totals", ["a"])
    with pytest.raises(StateReadError, match="keys must be a list"):
        rt.lookup("totals", 1)  # type: ignore[arg-type]
    with pytest.raises(StateReadError, match="nothing to evict"):
        Runtime(
            ledger_pipeline("full_ledger", partial=False),
            rt.ledger,
            spark,
            tmp_path / "data",
        ).evict("totals", [1])
    raw.epochs(
        "moves",
        {
            0: [*writes(0, 1, 2, 6), (1, 1, 7)],
            1: [*writes(1, 2, 3), (2, -1, -102)],  # the delete of epoch 0's write to 2
            2: [*writes(2, 1, 3, 6), (3, 1, -40)],
        },
    )
    rt.run()
    oracle = raw.oracle()
    for stage, expected in KINDS:
        want = expected(oracle)
        info = rt.state_info(stage)
        assert (info.partial, info.present_keys, info.rows) == (True, 0, 0), stage
        assert rows_of(rt, stage, 2) == [], stage  # holes' rows are not passed downstream
        first = rt.lookup(stage, [1, 2, 3, 4])
        assert first.rows == want(2, [1, 2, 3, 4]), stage
        assert (first.upqueried, first.hits, first.as_of) == ([1, 2, 3, 4], [], 2), stage
        assert [r["account"] for r in first.rows] == [1, 2, 3]  # 4 has no input: no row
        again = rt.lookup(stage, [3, 1])
        assert (again.hits, again.upqueried, again.rows) == ([3, 1], [], want(2, [3, 1])), stage
        earlier = rt.lookup(stage, [1, 3], as_of=0)  # a hit, as of an earlier epoch
        assert (earlier.hits, earlier.as_of, earlier.rows) == ([1, 3], 0, want(0, [1, 3]))
        hole = rt.lookup(stage, [6], as_of=1)  # a hole, as of an earlier epoch
        assert (hole.upqueried, hole.as_of, hole.rows) == ([6], 1, want(1, [6])), stage
        assert rt.lookup(stage, [6]).rows == want(2, [6]), stage  # its whole history was filled
        info = rt.state_info(stage)
        assert (info.present_keys, info.rows, info.hits, info.misses) == (5, 4, 5, 5), stage
        assert (info.upqueries, info.evictions, info.max_keys) == (2, 0, None), stage
        assert info.bytes > 0, stage


SPENT = T.StructType(
    [T.StructField("account", T.StringType()), T.StructField("cents", T.LongType())]
)


def test_a_full_stage_read_as_its_epoch_commits_is_answered_from_its_state_once(
    tmp_path: Path, spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lookup waits for epoch 1, and finds it committed by a run whose state commit comes
    after its ledger batch (here never: as if killed between the two): it settles that run's
    staged rows and answers from them. A full stage has every key: nothing is filled (a fill
    would add the keys' rows again)."""
    p = Pipeline("full_sums")
    p.aggregate(
        "sums", p.source("spent", schema=SPENT), key=["account"], aggs={"total": ("sum", "cents")}
    )
    with throwaway_runtime(p, spark, home=tmp_path) as rt:
        send_epochs(rt, "spent", {0: [("a", 5), ("b", 1)], 1: [("a", 7)]})
        rt.run_stage("sums", 0)
        processed = KeyedReads._processed

        def meanwhile(self: KeyedReads, spec: Any, as_of: int | None, wait: float) -> int:
            with monkeypatch.context() as killed:
                killed.setattr(KeyedState, "commit", lambda *args, **kwargs: None)
                rt.run_stage("sums", 1)
            return processed(self, spec, as_of, wait)

        with monkeypatch.context() as racing:
            racing.setattr(KeyedReads, "_processed", meanwhile)
            got = rt.lookup("sums", ["a", "b"], as_of=1, wait=5)
        assert (got.as_of, got.hits, got.upqueried) == (1, ["a", "b"], [])
        assert got.rows == [{"account": "a", "total": 12}, {"account": "b", "total": 1}]
        assert rt.lookup("sums", ["a"]).rows == [{"account": "a", "total": 12}]
        info = rt.state_info("sums")
        assert (info.present_keys, info.rows, info.upqueries) == (2, 2, 0)


def test_writes_to_a_hole_count_once_after_the_fill_and_an_empty_fill_takes_later_writes(
    tmp_path: Path, spark: SparkSession
) -> None:
    rt, raw = runtime(tmp_path, spark)
    raw.epochs("moves", {0: writes(0, 5, 8), 1: [*writes(1, 5), (5, 1, 3)]})
    rt.run()
    oracle = raw.oracle()
    for stage, expected in KINDS:
        filled = rt.lookup(stage, [5, 7])
        assert filled.rows == expected(oracle)(1, [5]), stage
        assert filled.upqueried == [5, 7], stage  # 7 has no input: filled empty, yet present
        assert rt.state_info(stage).present_keys == 2, stage
    raw.epochs("moves", {2: [*writes(2, 5, 7, 8), (5, -1, -105)], 3: writes(3, 7, 8)})
    rt.run()
    oracle = raw.oracle()
    for stage, expected in KINDS:
        read = rt.lookup(stage, [5, 7])
        assert (read.hits, read.rows) == ([5, 7], expected(oracle)(3, [5, 7])), stage
        assert rt.state_info(stage).present_keys == 2, stage  # 8 stayed a hole
        assert rt.lookup(stage, [8]).rows == expected(oracle)(3, [8]), stage


def test_an_evicted_key_reads_the_same_and_refills_with_what_it_missed(
    tmp_path: Path, spark: SparkSession
) -> None:
    rt, raw = runtime(tmp_path, spark)
    raw.epochs("moves", {0: writes(0, 1, 2), 1: [*writes(1, 1), (2, 1, 9)]})
    rt.run()
    before = {stage: rt.lookup(stage, [1, 2]).rows for stage, _ in KINDS}
    for stage, _ in KINDS:
        assert rt.evict(stage, [1, 9]) == [1], stage  # 9 was never present
        assert rt.evict(stage, [1]) == [], stage
        info = rt.state_info(stage)
        assert (info.present_keys, info.rows, info.evictions) == (1, 1, 1), stage
        reread = rt.lookup(stage, [1, 2])
        assert (reread.upqueried, reread.hits) == ([1], [2]), stage
        assert reread.rows == before[stage], stage
        assert sorted(rt.evict(stage, [2, 1])) == [1, 2], stage
    # writes and deletes while both keys are holes
    raw.epochs("moves", {2: [*writes(2, 1, 2), (1, -1, -101)], 3: [(2, -1, -9), (1, 1, 4)]})
    rt.run()
    oracle = raw.oracle()
    for stage, expected in KINDS:
        refilled = rt.lookup(stage, [1, 2])
        assert refilled.upqueried == [1, 2], stage
        assert refilled.rows == expected(oracle)(3, [1, 2]), stage
    raw.epochs("moves", {4: [*writes(4, 1), (2, 1, 11)]})
    rt.run()
    oracle = raw.oracle()
    for stage, expected in KINDS:
        read = rt.lookup(stage, [1, 2])
        assert (read.hits, read.rows) == ([1, 2], expected(oracle)(4, [1, 2])), stage


def test_a_key_of_the_wrong_type_is_refused_through_a_transform_naming_the_key_asked_for(
    tmp_path: Path, spark: SparkSession
) -> None:
    """The key's type is the nearest declared one up the chain (here the source's, above a
    transform), checked before the state store is asked."""
    moves = T.StructType(
        [T.StructField("account", T.LongType()), T.StructField("amount", T.LongType())]
    )
    p = Pipeline("wrong_type")
    kept = p.transform("kept", p.source("moves", schema=moves), fn=lambda df: df)
    p.aggregate("totals", kept, key=["account"], aggs={"total": ("sum", "amount")})
    with throwaway_runtime(p, spark, home=tmp_path) as rt:
        send_epochs(rt, "moves", {0: [(1, 5), (1, 2), (2, 4)]}, close=True)
        rt.run()
        with pytest.raises(StateReadError) as raised:
            rt.lookup("totals", ["a"])
        assert str(raised.value).endswith("key column 'account' is bigint: 'a' is not")
        assert raised.value.key == "a"
        (total,) = duckdb.sql(  # the oracle, over the rows sent
            "SELECT sum(amount) FROM (VALUES (1, 5), (1, 2), (2, 4)) t(account, amount) "
            "WHERE account = 1"
        ).fetchall()
        assert [r["total"] for r in rt.lookup("totals", [1]).rows] == [total[0]]


def test_a_key_of_the_wrong_type_is_refused_when_no_schema_declares_it(
    tmp_path: Path, spark: SparkSession
) -> None:
    """No declaration types the key (a transform makes it): the type written in the stage's
    output says it, and the error names the key asked for and that type."""
    moves = T.StructType(
        [T.StructField("account", T.LongType()), T.StructField("amount", T.LongType())]
    )
    p = Pipeline("written_type")
    named = p.transform(
        "named",
        p.source("moves", schema=moves),
        fn=lambda df: df.select(F.col("account").cast("string").alias("who"), "amount"),
    )
    p.aggregate("totals", named, key=["who"], aggs={"total": ("sum", "amount")})
    with throwaway_runtime(p, spark, home=tmp_path) as rt:
        send_epochs(rt, "moves", {0: [(1, 5), (1, 2), (2, 4)]}, close=True)
        rt.run()
        with pytest.raises(StateReadError) as raised:
            rt.lookup("totals", [1])
        assert str(raised.value).endswith("key column 'who' is string: 1 is not")
        assert raised.value.key == 1
        assert [r["total"] for r in rt.lookup("totals", ["1"]).rows] == [7]
