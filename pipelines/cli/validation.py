"""A pipeline checked whole without running it: every problem found, not only the first.

Defining a pipeline already refuses the first bad argument it meets. ``validate`` then checks
what only the whole pipeline shows, and lists every problem:

* the rules of the definition, again, stage by stage: names, join types, partial settings,
  sink paths, and whether each stage may read each of its inputs (partial state
  only below partial state keyed alike, no partial stage over a dimension, no keyed stage
  over a stage that is not materialized);
* the graph: every feedback connected, no loop that fails to advance time;
* the columns of every stage, derived over empty inputs as the executor derives them before
  a stage has data (``Stage.plan`` on empty frames, analysed by Spark, never run): a function
  that fails on them, key columns its input lacks, a stateful stage's key types and the
  columns its ``update`` returns;
* the sinks: each path's place under the runtime's home, two sinks publishing to one place or
  one inside another, a path inside the data directory, a path that is a file, a place that
  cannot be written.

Each problem is a ``PipelineDefinitionError`` naming the pipeline and the stage.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pipelines.errors import PipelineDefinitionError, StageFailedError, first_line
from pipelines.run.carry import check_key_columns, check_state_columns
from pipelines.run.sinks import resolve_sink_path
from pipelines.spark.empty import empty_frame
from pipelines.stages.arguments import (
    check_join_type,
    check_name,
    check_sink_path,
    missing_columns,
)
from pipelines.stages.families import check_reader
from pipelines.stages.kinds import FeedbackStage, JoinStage, SinkStage, Stage, StatefulStage
from pipelines.stages.partial import partial_setting
from pipelines.stages.pipeline import Pipeline

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType


@dataclass
class Validation:
    """What ``validate`` found: every problem, and the columns it derived per stage (None
    where they are not known before data: a loop's feedback before its first message)."""

    pipeline: Pipeline
    problems: list[PipelineDefinitionError] = field(default_factory=list)
    columns: dict[str, StructType | None] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems

    def refuse(self, stage: str | None, reason: str) -> None:
        self.problems.append(PipelineDefinitionError(self.pipeline.name, stage, reason))

    def attempt(self, check: Callable[..., object], *args: object) -> bool:
        """Run one check of the definition; its refusal is a problem. Whether it passed."""
        try:
            check(*args)
        except PipelineDefinitionError as err:
            self.problems.append(err)
            return False
        return True


def validate(pipeline: Pipeline, spark: SparkSession, *, home: Path, data: Path) -> Validation:
    """Every problem of ``pipeline`` (see the module docs), for a runtime whose home is
    ``home`` and whose data directory is ``data``."""
    found = Validation(pipeline)
    definition(found)
    graph(found)
    columns(found, spark)
    sinks(found, home, data)
    return found


def definition(found: Validation) -> None:
    """The definition's rules, checked again stage by stage, and every input each stage reads."""
    p = found.pipeline
    found.attempt(check_name, p.name, p.name, "pipeline")
    for stage in p.stages.values():
        found.attempt(check_name, p.name, stage.name, "source" if stage.is_source else "stage")
        if isinstance(stage, JoinStage):
            found.attempt(check_join_type, p.name, stage.name, stage.how)
        if isinstance(stage, SinkStage):
            found.attempt(check_sink_path, p.name, stage.name, stage.path)
        found.attempt(partial_setting, p.name, stage.name, stage.partial)
        for upstream in stage.inputs:
            if upstream not in p.stages:
                found.refuse(stage.name, f"reads {upstream!r}, which is not a stage")
            else:
                found.attempt(check_reader, p.name, stage, p.stages[upstream])


def graph(found: Validation) -> None:
    """Every feedback connected; then the graph compiles (no loop that fails to advance time)."""
    p = found.pipeline
    loose = [s.name for s in p.stages.values() if isinstance(s, FeedbackStage) and not s.inputs]
    for name in loose:
        found.refuse(name, "feedback was never connected (Pipeline.connect)")
    if not loose:
        found.attempt(p.graph)


def columns(found: Validation, spark: SparkSession) -> None:
    """Each stage's columns over empty inputs, in definition order (a feedback is unknown until
    the stage it carries back, as before a loop's first message)."""
    for stage in found.pipeline.stages.values():
        inputs = [found.columns.get(u) for u in stage.inputs]
        frames = [None if s is None else empty_frame(spark, s) for s in inputs]
        found.columns[stage.name] = _derived(found, stage, frames)


def _derived(found: Validation, stage: Stage, frames: list[DataFrame | None]) -> StructType | None:
    """``stage``'s columns over ``frames``, recording what is wrong on the way."""
    if not frames:  # a source declares them; a feedback not connected has none to derive
        return stage.schema
    first = frames[0]
    if stage.holds_state and first is not None:
        missing = [k for k in stage.key if k not in first.columns]
        if missing:  # matched exactly, as its run looks state up by them
            found.refuse(
                stage.name,
                f"key column(s) {missing} not in its input {stage.inputs[0]!r}, whose columns "
                f"over empty input are {', '.join(first.columns)}",
            )
            return stage.schema
    if isinstance(stage, JoinStage) and all(f is not None for f in frames):
        for side, upstream, frame in zip(("left", "right"), stage.inputs, frames, strict=True):
            assert frame is not None
            missing = missing_columns(stage.on, frame.columns)
            if missing:
                found.refuse(
                    stage.name,
                    f"join column(s) {missing} not in the {side} input {upstream!r}, whose "
                    f"columns over empty input are {', '.join(frame.columns)}",
                )
                return None
    if isinstance(stage, StatefulStage) and first is not None:
        return _stateful(found, stage, first)
    if stage.schema is not None:
        return stage.schema
    try:
        planned = stage.plan(frames)
        return None if planned is None else planned.schema
    except Exception as err:  # the user's function or Spark's analysis: the first line says
        found.refuse(stage.name, f"over empty input, {_stage_of(stage)} fails: {first_line(err)}")
        return None


def _stateful(found: Validation, stage: StatefulStage, batch: DataFrame) -> StructType:
    """A stateful stage's key columns against its input, and its ``update`` over an empty
    input and an empty state: the checks its run makes."""
    try:
        check_key_columns(stage.name, 0, batch, stage.key, stage.schema)
        state = empty_frame(batch.sparkSession, stage.schema)
        check_state_columns(stage.name, 0, stage.update(batch, state), stage.schema)
    except StageFailedError as err:
        found.refuse(stage.name, err.cause)
    except Exception as err:
        found.refuse(stage.name, f"over empty input, its update fails: {first_line(err)}")
    return stage.schema


def _stage_of(stage: Stage) -> str:
    return "its function" if stage.code is not None else f"the {stage.kind}"


def sinks(found: Validation, home: Path, data: Path) -> None:
    """Where each sink publishes, for a runtime whose home is ``home``."""
    places = {
        s.name: resolve_sink_path(s.path, home)
        for s in found.pipeline.stages.values()
        if isinstance(s, SinkStage)
    }
    for name, place in places.items():
        for other, there in places.items():
            if other == name:
                continue
            if there == place and other < name:
                found.refuse(name, f"publishes to {place}, as sink {other!r} does")
            elif place.is_relative_to(there) and place != there:
                found.refuse(name, f"publishes to {place}, inside sink {other!r}'s {there}")
        for problem in _place_problems(place, home, data):
            found.refuse(name, problem)


def _place_problems(place: Path, home: Path, data: Path) -> Iterator[str]:
    """Why a sink cannot publish to ``place``, if it cannot."""
    if place == home or home.is_relative_to(place):
        yield f"publishes to {place}, which holds the runtime's home {home}"
    elif place.is_relative_to(data) or data.is_relative_to(place):
        yield f"publishes to {place}, which overlaps the data directory {data}"
    if place.exists() and not place.is_dir():
        yield f"publishes to {place}, which is a file, not a directory"
        return
    existing = next((p for p in (place, *place.parents) if p.exists()), None)
    if existing is not None and not os.access(existing, os.W_OK | os.X_OK):
        yield f"publishes to {place}, but {existing} cannot be written"
