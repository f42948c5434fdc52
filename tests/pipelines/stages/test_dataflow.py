"""Defining pipelines: every mistake is refused when defined or compiled, naming the stage."""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
import pytest
from pyspark.sql import types as T

from pipelines.errors import PipelineDefinitionError
from pipelines.stages.kinds import DimensionStage, SourceStage
from pipelines.stages.pipeline import Pipeline
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
    "name",
    ["a/b", "..", "../x", "o'k", 'say"hi"', "1st", "with space", "class", "", "café", "名前"],
)
def test_names_that_are_not_identifiers_are_refused(name: str) -> None:
    p = Pipeline("demo")
    with pytest.raises(PipelineDefinitionError, match=r"source name .* not a valid identifier"):
        p.source(name, schema=SCHEMA)
    a = p.source("a", schema=SCHEMA)
    with pytest.raises(
        PipelineDefinitionError, match=r"stage name .* not a valid identifier"
    ) as err:
        p.transform(name, a, fn=identity)
    assert (err.value.pipeline, err.value.argument) == ("demo", "name")
    with pytest.raises(PipelineDefinitionError, match=r"pipeline name .* not a valid identifier"):
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


def refusal(call: Callable[[], object]) -> PipelineDefinitionError:
    """The definition error ``call`` raises."""
    with pytest.raises(PipelineDefinitionError) as err:
        call()
    return err.value


def test_a_join_type_spark_does_not_know_is_refused_naming_them() -> None:
    p = Pipeline("demo")
    a, b = p.source("a", schema=SCHEMA), p.source("b", schema=SCHEMA)
    err = refusal(lambda: p.join("j", a, b, on=["id"], how="bogus"))
    assert (err.pipeline, err.stage, err.argument) == ("demo", "j", "how")
    assert "'bogus' is not a Spark join type" in str(err)
    assert "left_anti" in str(err)
    assert "fullouter" in str(err)
    for how in ("inner", "LEFT_OUTER", "full", "semi", "left_anti", "cross"):
        p.join(f"j_{how.lower()}", a, b, on=["id"], how=how)


def test_join_columns_are_checked_against_every_side_whose_columns_are_known() -> None:
    p = Pipeline("demo")
    a = p.source("a", schema=SCHEMA)
    other = T.StructType([T.StructField("ID", T.LongType()), T.StructField("w", T.DoubleType())])
    b = p.source("b", schema=other)
    err = refusal(lambda: p.join("j", a, b, on=["w"]))
    assert (err.pipeline, err.stage, err.argument) == ("demo", "j", "on")
    assert "join column(s) ['w'] not in the left input 'a', whose columns are id, v" in str(err)
    err = refusal(lambda: p.join("j", a, b, on=["v"]))
    assert "not in the right input 'b'" in str(err)
    joined = p.join("j", a, b, on=["id"])  # names match as Spark matches them: any case
    assert p.columns("j") == ("id", "v", "w")
    assert "not in the left input 'j'" in str(refusal(lambda: p.join("k", joined, b, on=["x"])))
    p.join("left_only", a, b, on=["id"], how="left_semi")
    assert p.columns("left_only") == ("id", "v")
    both = p.union("both", a, p.source("c", schema=SCHEMA))
    assert p.columns("both") == ("id", "v")
    assert "not in the right input 'both'" in str(refusal(lambda: p.join("m", b, both, on=["w"])))
    kept = p.stateful("kept", a, key=["id"], schema=SCHEMA, update=lambda b, s: b)
    assert "not in the left input 'kept'" in str(refusal(lambda: p.join("n", kept, a, on=["w"])))


def test_a_join_with_a_side_a_function_decides_is_left_to_its_run() -> None:
    p = Pipeline("demo")
    a = p.source("a", schema=SCHEMA)
    t = p.transform("t", a, fn=identity)
    err = refusal(lambda: p.join("j", t, a, on=["anything"]))
    assert "not in the right input 'a'" in str(err)  # the known side is still checked
    p.join("j", t, p.transform("u", a, fn=identity), on=["anything"])
    assert p.columns("j") is None


def test_functions_must_be_callable() -> None:
    p = Pipeline("demo")
    a = p.source("a", schema=SCHEMA)
    cases: list[tuple[str, Callable[[], object]]] = [
        ("fn", lambda: p.transform("t", a, fn=None)),  # type: ignore[arg-type]
        ("update", lambda: p.stateful("s", a, key=["id"], schema=SCHEMA, update=None)),  # type: ignore[arg-type]
        ("init", lambda: p.iterate("i", a, init=None, step=identity)),  # type: ignore[arg-type]
        ("step", lambda: p.iterate("i", a, init=identity, step=42)),  # type: ignore[arg-type]
    ]
    for argument, call in cases:
        err = refusal(call)
        assert (err.pipeline, err.argument) == ("demo", argument)
        assert f"{argument} must be a function" in str(err)
    assert list(p.stages) == ["a"]  # nothing was added


def test_a_schema_must_be_a_spark_struct_type() -> None:
    p = Pipeline("demo")
    arrow = pa.schema([("id", pa.int64())])
    err = refusal(lambda: p.source("a", schema=arrow))  # type: ignore[arg-type]
    assert (err.pipeline, err.stage, err.argument) == ("demo", "a", "schema")
    assert "pyspark.sql.types.StructType" in str(err)
    assert "pyarrow schema" in str(err)
    assert "from_arrow_schema" in str(err)
    err = refusal(lambda: p.source("a", schema={"id": "long"}))  # type: ignore[arg-type]
    assert "got dict" in str(err)
    a = p.source("a", schema=SCHEMA)
    err = refusal(lambda: p.stateful("s", a, key=["id"], schema=arrow, update=identity))  # type: ignore[arg-type]
    assert (err.stage, err.argument) == ("s", "schema")


def test_key_columns_must_be_a_list_of_existing_columns() -> None:
    p = Pipeline("demo")
    err = refusal(lambda: p.source("a", schema=SCHEMA, key="id"))
    assert (err.stage, err.argument) == ("a", "key")
    assert "write key=['id']" in str(err)
    assert "key columns ['nope'] not in schema" in str(
        refusal(lambda: p.source("a", schema=SCHEMA, key=["nope"]))
    )
    a = p.source("a", schema=SCHEMA)
    state = T.StructType([T.StructField("k", T.LongType()), T.StructField("n", T.LongType())])
    err = refusal(lambda: p.stateful("s", a, key=["k"], schema=state, update=identity))
    assert (err.stage, err.argument) == ("s", "key")
    assert "key columns ['k'] not in its input 'a'" in str(err)
    assert "needs key columns" in str(
        refusal(lambda: p.stateful("s", a, key=[], schema=SCHEMA, update=identity))
    )
    assert "must be a list of column names, not the string" in str(
        refusal(lambda: p.join("j", a, a, on="id"))  # type: ignore[arg-type]
    )


def test_a_union_of_known_inputs_needs_the_same_columns() -> None:
    p = Pipeline("demo")
    a = p.source("a", schema=SCHEMA)
    b = p.source("b", schema=T.StructType([T.StructField("id", T.LongType())]))
    err = refusal(lambda: p.union("u", a, b))
    assert (err.stage, err.argument) == ("u", "inputs")
    assert "'a' has id, v; 'b' has id" in str(err)
    p.union("u", a, p.transform("t", b, fn=identity))  # the function's output decides
