"""A partial stage's run (a fold's, an aggregate's) refuses input whose key column is null or of
another type than its state's: the error names the stage, the epoch and the column (and the file
of a null), and nothing is committed; the epoch runs once its input is right, exactly as DuckDB
SQL says."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines import Pipeline
from pipelines.errors import RunFailedError, StageFailedError
from pipelines.run.runtime import Runtime
from progress.ledger import Ledger
from tests.fixtures.partials import AGGS, BALANCES, MOVES, Raw, fold, writes

pytestmark = pytest.mark.spark

STAGES = ("balances", "totals")


def accounts_as(key_type: T.DataType) -> Callable[[DataFrame], DataFrame]:
    """The moves with their account as ``key_type``; a move of no amount has no account."""

    def keyed(df: DataFrame) -> DataFrame:
        account = F.when(F.col("amount") != 0, F.col("account")).cast(key_type)
        return df.withColumn("account", account)

    return keyed


def typed(key_type: T.DataType) -> Pipeline:
    """``moves`` keyed by a transform (whose column types show only when it runs) and read
    by the partial fold ``balances`` and the partial aggregate ``totals``."""
    p = Pipeline("typed")
    moves = p.source("moves", schema=MOVES)
    keyed = p.transform("keyed", moves, fn=accounts_as(key_type))
    p.stateful("balances", keyed, key=["account"], schema=BALANCES, update=fold, partial=True)
    p.aggregate("totals", keyed, key=["account"], aggs=AGGS, partial=True)
    return p


def test_a_null_key_or_a_key_of_another_type_is_refused_and_nothing_committed(
    tmp_path: Path, spark: SparkSession
) -> None:
    ledger = Ledger(tmp_path / "ledger.duckdb")
    rt = Runtime(typed(T.LongType()), ledger, spark, tmp_path / "data")
    raw = Raw(rt, tmp_path / "raw")
    raw.epochs("moves", {0: writes(0, 1, 2)})
    rt.run()
    for stage in STAGES:
        rt.lookup(stage, [1, 2])  # both filled: present from now on

    # A new definition of the transform turns the key into text: refused before any state.
    raw.epochs("moves", {1: writes(1, 1, 2)})
    as_text = Runtime(typed(T.StringType()), ledger, spark, tmp_path / "data")
    for wrong in refusals(as_text, ledger, 1):
        assert "key column 'account' of its input is string, the state's is bigint" in str(wrong)
    rt.revise("keyed", [1])  # the right definition again
    rt.run()
    oracle = raw.oracle()
    assert rt.lookup("balances", [1, 2]).rows == oracle.balances(1, [1, 2])
    assert rt.lookup("totals", [1, 2]).rows == oracle.totals(1, [1, 2])

    raw.epochs("moves", {2: [*writes(2, 1), (2, 1, 0)]})  # the move of 0 has a null account
    for null in refusals(rt, ledger, 2):
        assert null.file is not None
        assert null.file.endswith(".parquet")
        assert f"key column 'account' of its input is null in a row of {null.file}" in str(null)


def refusals(rt: Runtime, ledger: Ledger, epoch: int) -> list[StageFailedError]:
    """The refusals of ``epoch`` by both keyed stages, checked to name the stage, the epoch and
    the key column, and to have committed nothing: the epoch is not done, and the state, its
    counters and every read are as they were."""
    infos = {stage: rt.state_info(stage) for stage in STAGES}
    before = {stage: rt.lookup(stage, [1, 2]) for stage in STAGES}
    with pytest.raises(RunFailedError) as err:
        rt.run()
    failures = sorted(err.value.failures, key=lambda f: f.stage)
    assert [(f.stage, f.epoch, f.column) for f in failures] == [
        (stage, epoch, "account") for stage in STAGES
    ]
    (status,) = [s for s in ledger.status("typed") if s.stage == "keyed"]
    assert epoch in status.done  # the transform ran: what it wrote is what is refused
    for failure in failures:
        stage = failure.stage
        assert str(failure).endswith("; nothing was committed")
        assert ledger.message("typed", stage, 0, epoch) == []
        (status,) = [s for s in ledger.status("typed") if s.stage == stage]
        assert epoch not in status.done
        info = infos[stage]
        assert rt.state_info(stage) == dataclasses.replace(info, hits=info.hits + 2)
        after = rt.lookup(stage, [1, 2])
        assert (after.rows, after.as_of, after.hits) == (before[stage].rows, epoch - 1, [1, 2])
    return failures
