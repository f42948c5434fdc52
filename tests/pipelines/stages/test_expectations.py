"""Expectations are checked when they are defined: a name that is an identifier and new on its
stage, one of a condition and ``unique=`` columns that exist where the definition knows them,
``on_fail`` one of warn, drop, fail, and a stage whose kind can take it. So is a stage's
freshness, given where the stage is defined."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines.errors import PipelineDefinitionError, UnknownStageError
from pipelines.stages.expectations import Expectation, OnFail
from pipelines.stages.pipeline import Pipeline
from tests.fixtures.shop import shop

pytestmark = pytest.mark.unit

SCHEMA = T.StructType([T.StructField("k", T.LongType())])


@pytest.fixture
def p(tmp_path: Path) -> Pipeline:
    return shop(tmp_path / "export")


def refused(p: Pipeline, *args: object, **kwargs: object) -> PipelineDefinitionError:
    with pytest.raises(PipelineDefinitionError) as raised:
        p.expect(*args, **kwargs)  # type: ignore[arg-type]
    return raised.value


def test_a_good_expectation_is_kept_in_order_per_stage(p: Pipeline) -> None:
    first = p.expect("orders", "positive", "amount > 0", on_fail="drop")
    second = p.expect("orders", "one_per_order", unique=["order_id"], on_fail=OnFail.FAIL)
    third = p.expect("by_category", "some_total", "total IS NOT NULL")
    assert first == Expectation("orders", "positive", "amount > 0", (), OnFail.DROP)
    assert second.unique == ("order_id",)
    assert second.describe() == "unique (order_id)"
    assert third.on_fail is OnFail.WARN  # the default
    assert p.expectations("orders") == (first, second)
    assert p.expectations() == (first, second, third)
    assert p.expectations("movements") == ()


def test_bad_definitions_are_refused_naming_the_argument(p: Pipeline) -> None:
    err = refused(p, "orders", "not a name", "amount > 0")
    assert (err.stage, err.argument) == ("orders", "name")
    p.expect("orders", "positive", "amount > 0")
    assert "exists" in refused(p, "orders", "positive", "amount > 1").reason
    err = refused(p, "orders", "x", "amount > 0", on_fail="explode")
    assert err.argument == "on_fail"
    assert "'warn', 'drop', 'fail'" in err.reason
    assert refused(p, "orders", "x").argument == "condition"  # neither
    assert refused(p, "orders", "x", "a > 0", unique=["order_id"]).argument == "condition"
    assert refused(p, "orders", "x", "  ").argument == "condition"
    err = refused(p, "orders", "x", unique=["order_id", "nope"])
    assert err.argument == "unique"
    assert "'nope'" in err.reason
    assert "amount" in err.reason
    assert refused(p, "orders", "x", unique=["order_id", "order_id"]).argument == "unique"
    assert refused(p, "orders", "x", unique=[]).argument == "unique"
    with pytest.raises(UnknownStageError):
        p.expect("nowhere", "x", "a > 0")


def test_drop_needs_a_kind_written_row_for_row(tmp_path: Path) -> None:
    p = Pipeline("kinds")
    src = p.source("src", schema=SCHEMA, workers=1)
    totals = p.aggregate("totals", src, key=["k"], aggs={"n": ("count", None)})
    err = refused(p, totals, "few", "n < 10", on_fail="drop")
    assert err.argument == "on_fail"
    assert "aggregate" in err.reason
    p.expect(totals, "few", "n < 10", on_fail="fail")  # warn and fail are for any kind
    hidden = p.transform("hidden", src, fn=lambda df: df.where(F.col("k") > 0), materialize=False)
    assert "not materialized" in refused(p, hidden, "x", "k > 0").reason
    other = Pipeline("other")
    stream = other.source("src", schema=SCHEMA, workers=1)
    assert "belongs to pipeline 'other'" in refused(p, stream, "x", "k > 0").reason


def test_every_stage_with_output_epochs_may_declare_its_freshness() -> None:
    hour = timedelta(hours=1)
    p = Pipeline("fresh")
    src = p.source("src", schema=SCHEMA, freshness=hour)
    dim = p.dimension("dim", schema=SCHEMA, freshness=hour)
    copied = p.transform("copied", src, fn=lambda df: df, freshness=hour)
    both = p.union("both", src, copied, freshness=hour)
    joined = p.join("joined", both, dim, on=["k"], freshness=hour)
    p.stateful("kept", joined, key=["k"], schema=SCHEMA, update=lambda b, s: b, freshness=hour)
    p.aggregate("totals", joined, key=["k"], aggs={"n": ("count", None)}, freshness=hour)
    p.iterate("fixed", src, init=lambda df: df, step=lambda s, b: s, freshness=hour)
    p.transform("plain", src, fn=lambda df: df)
    assert p.fresh_within == dict.fromkeys(
        ["src", "dim", "copied", "both", "joined", "kept", "totals", "fixed"], hour
    )
    with pytest.raises(PipelineDefinitionError) as raised:
        p.transform("stale", src, fn=lambda df: df, freshness=timedelta(0))
    assert (raised.value.stage, raised.value.argument) == ("stale", "within")
    assert "stale" not in p.stages  # nothing of a refused stage is kept
    p.sink("out", src, path="out")
    with pytest.raises(PipelineDefinitionError, match="a sink has no epochs"):
        p.freshness("out", hour)
