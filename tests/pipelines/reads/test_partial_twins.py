"""A partial stage reads the same as its full twin over the same input, whatever the epochs,
reads (as of any done epoch) and evictions in between: for a fold and for an aggregate.

Each example costs Spark runs, so there are few (``HYPOTHESIS_EXAMPLES=N``: N / 50, at least
4); ``tests/state_store/test_partial_twins.py`` checks the same rules on the state store with
many more, without Spark."""

from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from pipelines import Pipeline
from pipelines.run.runtime import Runtime
from progress.ledger import Ledger
from tests.fixtures.partials import AGGS, BALANCES, MOVES, Raw, fold

pytestmark = pytest.mark.spark

EXAMPLES = max(4, int(os.environ.get("HYPOTHESIS_EXAMPLES", "0")) // 50)
STAGES = ("balances", "totals")
keys = st.lists(st.integers(1, 5), min_size=1, max_size=3, unique=True)
moves = st.lists(
    st.tuples(st.integers(1, 4), st.sampled_from([1, -1]), st.integers(-9, 9)), max_size=4
)
actions = st.lists(
    st.one_of(
        st.tuples(st.just("epoch"), moves),
        st.tuples(st.just("read"), st.sampled_from(STAGES), keys, st.integers(0, 2)),
        st.tuples(st.just("evict"), st.sampled_from(STAGES), keys),
    ),
    min_size=3,
    max_size=5,
)


def twins() -> Pipeline:
    """A partial fold and a partial aggregate, each with a full twin, over one source."""
    p = Pipeline("twins")
    m = p.source("moves", schema=MOVES)
    for suffix, partial in (("", True), ("_full", False)):
        p.stateful(
            f"balances{suffix}", m, key=["account"], schema=BALANCES, update=fold, partial=partial
        )
        p.aggregate(f"totals{suffix}", m, key=["account"], aggs=AGGS, partial=partial)
    return p


def same_read(rt: Runtime, stage: str, asked: list[int], as_of: int) -> None:
    partial = rt.lookup(stage, asked, as_of=as_of)
    full = rt.lookup(f"{stage}_full", asked, as_of=as_of)
    assert partial.rows == full.rows, (stage, asked, as_of)
    assert partial.as_of == full.as_of == as_of


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    phases=[Phase.generate],  # shrinking would re-run Spark many times over
    suppress_health_check=list(HealthCheck),
)
@given(st.tuples(st.just("epoch"), moves), actions)
def test_every_read_of_a_partial_stage_equals_its_full_twins(
    tmp_path_factory: pytest.TempPathFactory,
    spark: SparkSession,
    first: tuple[Any, ...],
    steps: list[tuple[Any, ...]],
) -> None:
    root = tmp_path_factory.mktemp("twins")
    rt = Runtime(twins(), Ledger(root / "ledger.duckdb"), spark, root / "data")
    raw = Raw(rt, root / "raw")
    last = -1
    for step in [first, *steps]:
        if step[0] == "epoch":
            last += 1
            raw.epochs("moves", {last: step[1]})
            rt.run()
        elif step[0] == "read":
            _, stage, asked, back = step
            same_read(rt, stage, asked, max(last - back, 0))
        else:
            _, stage, asked = step
            rt.evict(stage, asked)
    oracle = raw.oracle()
    expected = {"balances": oracle.balances, "totals": oracle.totals}
    for stage in STAGES:
        same_read(rt, stage, [1, 2, 3, 4, 5], last)
        assert rt.lookup(stage, [1, 2, 3, 4, 5]).rows == expected[stage](last, [1, 2, 3, 4, 5])
