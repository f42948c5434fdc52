"""A stage name the pipeline does not have: one error, one sentence, from every entry point."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from pyspark.sql import types as T

from pipelines import PartialState, Pipeline, PipelineDefinitionError, Runtime
from pipelines.errors import UnknownStageError
from pipelines.testing import throwaway_runtime
from progress.errors import UnknownNodeError

pytestmark = pytest.mark.ledger

MOVES = T.StructType([T.StructField("account", T.LongType()), T.StructField("cents", T.LongType())])
SENTENCE = (
    "pipeline 'shop', stage 'vaild': no such stage (did you mean 'valid'?); "
    "its stages: moves, valid, balances"
)


def shop() -> Pipeline:
    p = Pipeline("shop")
    valid = p.transform("valid", p.source("moves", schema=MOVES), fn=lambda df: df)
    p.aggregate(
        "balances",
        valid,
        key=["account"],
        aggs={"cents": ("sum", "cents")},
        partial=PartialState(),
    )
    return p


ENTRY_POINTS: dict[str, Callable[[Runtime], object]] = {
    "stage": lambda rt: rt.pipeline.stage("vaild"),
    "columns": lambda rt: rt.pipeline.columns("vaild"),
    "input": lambda rt: rt.input("vaild", 0),
    "read": lambda rt: rt.read("vaild", 0),
    "run_stage": lambda rt: rt.run_stage("vaild", 0),
    "revise": lambda rt: rt.revise("vaild", [0]),
    "backfill": lambda rt: rt.backfill("vaild", [0]),
    "blockers": lambda rt: rt.blockers("vaild", 0),
    "lookup": lambda rt: rt.lookup("vaild", [1]),
    "evict": lambda rt: rt.evict("vaild", [1]),
    "state_info": lambda rt: rt.state_info("vaild"),
    "request": lambda rt: rt.request("vaild", [1], 0),
}


@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_an_unknown_stage_is_one_error_with_one_sentence_everywhere(entry: str) -> None:
    with throwaway_runtime(shop()) as rt, pytest.raises(UnknownStageError) as caught:
        ENTRY_POINTS[entry](rt)
    err = caught.value
    assert str(err) == SENTENCE
    assert (err.pipeline, err.stage, err.known) == ("shop", "vaild", ("moves", "valid", "balances"))
    # Callers that caught either family before still do.
    assert isinstance(err, PipelineDefinitionError)
    assert isinstance(err, UnknownNodeError)
    assert isinstance(err, KeyError)


def test_a_name_close_to_none_suggests_nothing() -> None:
    with pytest.raises(UnknownStageError, match=r"stage 'zzz': no such stage; its stages: "):
        shop().stage("zzz")
