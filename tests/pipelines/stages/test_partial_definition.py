"""Partial state at definition: only partial stages keyed alike read a partial stage, key
columns must be in the input with the state's types, and ``partial=`` takes only its forms."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from pyspark.sql import types as T

from pipelines import PartialState, Pipeline
from pipelines.errors import PipelineDefinitionError
from tests.fixtures.partials import AGGS, BALANCES, MOVES, fold

pytestmark = pytest.mark.unit

FEEDS_FULL = "partial stage 'totals' feeds full stage"
OMITS = "its output omits keys that were never read"

READERS: list[tuple[str, Callable[[Pipeline], object], str]] = [
    ("transform", lambda p: p.transform("t", "totals", fn=lambda df: df), "(a transform) 't'"),
    ("join", lambda p: p.join("j", "moves", "totals", on=["account"]), "(a join) 'j'"),
    ("join right", lambda p: p.join("j", "totals", "moves", on=["account"]), "(a join) 'j'"),
    ("union", lambda p: p.union("u", "totals", "totals"), "(a union) 'u'"),
    ("sink", lambda p: p.sink("s", "totals", path="out"), "(a sink) 's'"),
    (
        "full stateful",
        lambda p: p.stateful("f", "totals", key=["account"], schema=BALANCES, update=fold),
        "'f'",
    ),
    (
        "full aggregate",
        lambda p: p.aggregate("f", "totals", key=["account"], aggs={"n": ("count", None)}),
        "'f'",
    ),
]


def base() -> Pipeline:
    p = Pipeline("book")
    moves = p.source("moves", schema=MOVES)
    p.aggregate("totals", moves, key=["account"], aggs=AGGS, partial=True)
    return p


@pytest.mark.parametrize(("what", "add", "named"), READERS, ids=[r[0] for r in READERS])
def test_a_full_reader_of_a_partial_stage_is_refused_with_the_reason(
    what: str, add: Callable[[Pipeline], object], named: str
) -> None:
    p = base()
    with pytest.raises(PipelineDefinitionError) as err:
        add(p)
    assert f"{FEEDS_FULL} {named}: {OMITS}" in str(err.value)
    assert list(p.stages) == ["moves", "totals"]  # nothing was added


def test_a_feedback_carrying_a_partial_stage_is_refused() -> None:
    p = base()
    back = p.feedback("back", delay=1)
    with pytest.raises(PipelineDefinitionError, match=f"{FEEDS_FULL} .*'back': {OMITS}"):
        p.connect(back, "totals")


def test_partial_below_partial_must_share_the_key() -> None:
    p = base()
    per_amount = p.aggregate(
        "per_amount", "moves", key=["amount"], aggs={"n": ("count", None)}, partial=True
    )
    with pytest.raises(PipelineDefinitionError, match="partial stages must share their key"):
        p.aggregate("again", per_amount, key=["n"], aggs={"k": ("count", None)}, partial=True)
    with pytest.raises(
        PipelineDefinitionError,
        match=r"partial stage 'totals' \(keyed on account\) feeds partial stage 'by_total' "
        "keyed on total",
    ):
        p.aggregate("by_total", "totals", key=["total"], aggs={"n": ("count", None)}, partial=True)
    p.aggregate("rollup", "totals", key=["account"], aggs={"t": ("sum", "total")}, partial=True)
    p.stateful(
        "folded", "totals", key=["account"], schema=BALANCES, update=fold, partial=PartialState(3)
    )
    assert p.stage("folded").partial == PartialState(max_keys=3)


def test_key_columns_must_be_in_the_input_with_the_states_types() -> None:
    p = base()
    with pytest.raises(PipelineDefinitionError, match=r"key columns \['acct'\] not in its input"):
        p.aggregate("a", "moves", key=["acct"], aggs={"n": ("count", None)}, partial=True)
    renamed = T.StructType([T.StructField("acct", T.LongType()), *BALANCES.fields[1:]])
    with pytest.raises(PipelineDefinitionError, match=r"key columns \['acct'\] not in its input"):
        p.stateful("b", "moves", key=["acct"], schema=renamed, update=fold, partial=True)
    as_text = T.StructType([T.StructField("account", T.StringType()), *BALANCES.fields[1:]])
    with pytest.raises(
        PipelineDefinitionError,
        match="key column 'account' is bigint in its input 'moves' and string in its schema",
    ):
        p.stateful("b", "moves", key=["account"], schema=as_text, update=fold, partial=True)


@pytest.mark.parametrize("value", [PartialState(max_keys=0), PartialState(2.5), "yes", 1])  # type: ignore[arg-type]
def test_partial_takes_only_a_bool_or_a_partial_state(value: object) -> None:
    p = base()
    with pytest.raises(PipelineDefinitionError, match="argument 'partial'"):
        p.aggregate("a", "moves", key=["account"], aggs=AGGS, partial=value)  # type: ignore[arg-type]


def test_a_partial_stage_cannot_read_a_dimension() -> None:
    p = base()
    p.dimension("accounts", schema=MOVES)
    with pytest.raises(PipelineDefinitionError, match="cannot read dimension source 'accounts'"):
        p.aggregate("a", "accounts", key=["account"], aggs=AGGS, partial=True)
