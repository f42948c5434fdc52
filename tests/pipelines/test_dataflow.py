"""Defining pipelines: every mistake is refused when defined or compiled, naming the stage."""

from __future__ import annotations

import pytest
from pyspark.sql import types as T

from pipelines.dataflow import Pipeline
from pipelines.errors import PipelineDefinitionError
from pipelines.stages import DimensionStage, SourceStage
from progress import Delay, Source, Target

pytestmark = pytest.mark.unit

SCHEMA = T.StructType([T.StructField("id", T.LongType()), T.StructField("v", T.StringType())])


def identity(df: object) -> object:
    return df


def test_compiles_to_a_graph_with_delays_and_workers() -> None:
    p = Pipeline("demo")
    a = p.source("a", schema=SCHEMA, workers=3, key=["id"])
    b = p.transform("b", a, fn=identity, delay=7)
    p.sink("out", b, path="/tmp/out")
    graph = p.graph()
    assert graph.node("a").workers == 3
    assert graph.node("b").workers == 0
    assert graph.summaries(Source("a"), Source("b")).elements == (Delay(7),)
    assert graph.node("out").outputs == 0
    assert p.downstream("a") == ["b"]


@pytest.mark.parametrize(
    "name", ["a/b", "..", "../x", "o'k", 'say"hi"', "1st", "with space", "class", ""]
)
def test_names_that_are_not_identifiers_are_refused(name: str) -> None:
    p = Pipeline("demo")
    with pytest.raises(PipelineDefinitionError, match="not a valid identifier"):
        p.source(name, schema=SCHEMA)
    with pytest.raises(PipelineDefinitionError, match="not a valid identifier"):
        Pipeline(name)


def test_unknown_input_duplicate_and_misuse_are_refused() -> None:
    p = Pipeline("demo")
    a = p.source("a", schema=SCHEMA)
    with pytest.raises(PipelineDefinitionError, match="a stage of that name exists"):
        p.transform("a", a, fn=identity)
    with pytest.raises(
        PipelineDefinitionError, match="unknown input 'nope'; defined so far: a"
    ) as err:
        p.transform("b", "nope", fn=identity)
    assert (err.value.pipeline, err.value.stage) == ("demo", "b")
    with pytest.raises(PipelineDefinitionError, match="at least two inputs"):
        p.union("u", a)
    with pytest.raises(PipelineDefinitionError, match="key columns"):
        p.source("c", schema=SCHEMA, key=["missing"])
    with pytest.raises(PipelineDefinitionError, match="at least one worker"):
        p.source("d", schema=SCHEMA, workers=0)
    other = Pipeline("other").source("x", schema=SCHEMA)
    with pytest.raises(PipelineDefinitionError, match="belongs to pipeline 'other'"):
        p.transform("e", other, fn=identity)


def test_a_feedback_loop_must_delay() -> None:
    p = Pipeline("loop")
    a = p.source("a", schema=SCHEMA)
    back = p.feedback("yesterday", delay=0)
    both = p.union("both", a, back)
    p.connect(back, p.transform("step", both, fn=identity))
    with pytest.raises(PipelineDefinitionError, match="does not advance time") as err:
        p.graph()
    assert err.value.stage in {"both", "step", "yesterday"}

    ok = Pipeline("loop")
    a = ok.source("a", schema=SCHEMA)
    back = ok.feedback("yesterday", delay=1)
    both = ok.union("both", a, back)
    ok.connect(back, ok.transform("step", both, fn=identity))
    graph = ok.graph()
    assert graph.summaries(Source("step"), Target("both", 1)).elements == (Delay(1),)


def test_an_unconnected_feedback_is_refused() -> None:
    p = Pipeline("loop")
    p.feedback("dangling", delay=1)
    with pytest.raises(PipelineDefinitionError, match="never connected"):
        p.graph()


def test_a_dimension_is_a_source_read_as_a_table() -> None:
    p = Pipeline("desk")
    p.dimension("accounts", schema=SCHEMA, workers=2, key=["id"])
    stage = p.stage("accounts")
    assert isinstance(stage, DimensionStage)
    assert isinstance(stage, SourceStage)  # its workers send, advance and close
    assert (stage.kind, stage.workers, stage.key, stage.is_source) == (
        "dimension",
        2,
        ("id",),
        True,
    )
    assert "latest message at or before e" in stage.describe()
    assert p.graph().node("accounts").workers == 2
    assert type(p.stage(p.source("events", schema=SCHEMA).stage)) is SourceStage
    with pytest.raises(PipelineDefinitionError, match="a dimension source needs at least one"):
        p.dimension("users", schema=SCHEMA, workers=0)
    with pytest.raises(PipelineDefinitionError, match=r"key columns \['user'\] not in schema"):
        p.dimension("users", schema=SCHEMA, key=["user"])
