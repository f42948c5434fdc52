"""The pipeline API: sources, stages and the streams between them, compiled to a progress graph.

    bank = Pipeline("bank")
    cards = bank.source("card_payments", schema=CARDS, workers=3, key=["payment_id"])
    valid = bank.transform("validate_cards", cards, fn=lambda df: df.where("amount > 0"))
    totals = bank.transform("category_totals", valid, fn=per_category)

A stage's logic is an ordinary function over Spark DataFrames for one epoch. Every definition
error (an unknown input, a duplicate name, a name that is not an identifier, a cycle that does
not advance time) is raised when the pipeline is defined or compiled, never at run time.
"""

from __future__ import annotations

import keyword
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pipelines.carry import StateUpdate
from pipelines.clock import EXPLICIT, AfterEpochEnd, CloseRule, DoneMarkers, EpochClock, Explicit
from pipelines.errors import PipelineDefinitionError
from pipelines.iteration import RoundStep, Transform
from pipelines.sinks import check_sink_path
from pipelines.stages import (
    DEFAULT_MAX_ROUNDS,
    FeedbackStage,
    IterateStage,
    JoinStage,
    SinkStage,
    SourceStage,
    Stage,
    StatefulStage,
    TransformStage,
    UnionStage,
    with_inputs,
)
from progress import CycleError, Delay, Graph, GraphBuilder, Source, Target

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

    from progress.ledger import Ledger

__all__ = ["Pipeline", "RoundStep", "Stage", "StateUpdate", "Stream", "Transform", "check_name"]


@dataclass(frozen=True)
class Stream:
    """The output of a stage: what other stages read."""

    pipeline: str
    stage: str


def check_name(pipeline: str, name: object, what: str = "stage") -> str:
    """Names become paths, table names and Dagster asset keys: identifiers only."""
    if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
        raise PipelineDefinitionError(
            pipeline,
            None,
            f"{what} name {name!r} is not a valid identifier (letters, digits and _, "
            "not starting with a digit)",
        )
    return name


class Pipeline:
    """A pipeline under definition. ``compile()`` gives its progress graph."""

    def __init__(self, name: str, *, clock: EpochClock | None = None) -> None:
        """``clock`` schedules the pipeline's epochs (see ``pipelines.clock``): it opens them,
        and closes those of sources whose close rule is time-based."""
        self.name = check_name(name, name, "pipeline")
        self.clock = clock
        self._stages: dict[str, Stage] = {}
        self._feedback: dict[str, str | None] = {}
        self._compiled: Graph | None = None

    # -- definition ----------------------------------------------------------------------------

    def _add(self, stage: Stage) -> Stream:
        check_name(self.name, stage.name)
        if stage.name in self._stages:
            raise PipelineDefinitionError(self.name, stage.name, "a stage of that name exists")
        if type(stage.delay) is not int or stage.delay < 0:
            raise PipelineDefinitionError(self.name, stage.name, "delay must be an int >= 0")
        self._stages[stage.name] = stage
        self._compiled = None
        return Stream(self.name, stage.name)

    def _input(self, stage: str, stream: Stream | str) -> str:
        name = stream.stage if isinstance(stream, Stream) else stream
        if isinstance(stream, Stream) and stream.pipeline != self.name:
            raise PipelineDefinitionError(
                self.name, stage, f"input {name!r} belongs to pipeline {stream.pipeline!r}"
            )
        if name not in self._stages:
            known = ", ".join(self._stages) or "(none)"
            raise PipelineDefinitionError(
                self.name, stage, f"unknown input {name!r}; defined so far: {known}"
            )
        if not self._stages[name].outputs:
            raise PipelineDefinitionError(self.name, stage, f"{name!r} is a sink: nothing reads it")
        return name

    def source(
        self,
        name: str,
        *,
        schema: StructType,
        workers: int = 1,
        key: Sequence[str] = (),
        close: CloseRule = EXPLICIT,
    ) -> Stream:
        """An input with ``workers`` independent producers; ``key`` columns may not be null.
        ``close`` says how its epochs close: by its workers (the default), some time after each
        epoch ends (the pipeline needs a clock), or by each worker's done-marker."""
        if type(workers) is not int or workers < 1:
            raise PipelineDefinitionError(self.name, name, "a source needs at least one worker")
        missing = [k for k in key if k not in schema.fieldNames()]
        if missing:
            raise PipelineDefinitionError(self.name, name, f"key columns {missing} not in schema")
        if not isinstance(close, Explicit | AfterEpochEnd | DoneMarkers):
            raise PipelineDefinitionError(
                self.name, name, f"close must be Explicit, AfterEpochEnd or DoneMarkers: {close!r}"
            )
        if isinstance(close, AfterEpochEnd) and self.clock is None:
            raise PipelineDefinitionError(
                self.name,
                name,
                "closing after each epoch ends needs an epoch clock: Pipeline(..., clock=...)",
            )
        return self._add(
            SourceStage(name=name, schema=schema, workers=workers, key=tuple(key), close=close)
        )

    def close_rule(self, source: str) -> CloseRule:
        """How ``source``'s epochs close."""
        stage = self.stage(source)
        return stage.close if isinstance(stage, SourceStage) else EXPLICIT

    def transform(self, name: str, input: Stream | str, fn: Transform, *, delay: int = 0) -> Stream:
        """Any DataFrame-to-DataFrame function of one epoch's input. With ``delay=k`` the output
        of epoch ``t`` belongs to epoch ``t + k``."""
        inputs = (self._input(name, input),)
        return self._add(TransformStage(name=name, inputs=inputs, fn=fn, delay=delay))

    def union(self, name: str, *inputs: Stream | str) -> Stream:
        """All rows of several inputs with the same columns (matched by name)."""
        if len(inputs) < 2:
            raise PipelineDefinitionError(self.name, name, "a union needs at least two inputs")
        return self._add(UnionStage(name=name, inputs=tuple(self._input(name, i) for i in inputs)))

    def join(
        self,
        name: str,
        left: Stream | str,
        right: Stream | str,
        *,
        on: Sequence[str],
        how: str = "inner",
    ) -> Stream:
        """The rows of one epoch of ``left`` joined with the same epoch of ``right``."""
        if not on:
            raise PipelineDefinitionError(self.name, name, "a join needs columns to join on")
        inputs = (self._input(name, left), self._input(name, right))
        return self._add(JoinStage(name=name, inputs=inputs, on=tuple(on), how=how))

    def stateful(
        self,
        name: str,
        input: Stream | str,
        *,
        key: Sequence[str],
        schema: StructType,
        update: StateUpdate,
    ) -> Stream:
        """A keyed stage whose state carries from epoch to epoch, processed strictly in order.

        ``schema`` is the state's columns (``key`` among them). ``update(batch, state)`` gets
        one epoch's input and the state rows of the keys in it (absent for new keys) and
        returns the new state rows of those keys: they replace the old ones and are the
        stage's output for the epoch."""
        if not key:
            raise PipelineDefinitionError(self.name, name, "a stateful stage needs key columns")
        missing = [k for k in key if k not in schema.fieldNames()]
        if missing:
            raise PipelineDefinitionError(self.name, name, f"key columns {missing} not in schema")
        inputs = (self._input(name, input),)
        return self._add(
            StatefulStage(name=name, inputs=inputs, key=tuple(key), schema=schema, update=update)
        )

    def iterate(
        self,
        name: str,
        input: Stream | str,
        *,
        init: Transform,
        step: RoundStep,
        max_rounds: int = DEFAULT_MAX_ROUNDS,
    ) -> Stream:
        """Rounds of Spark jobs to a fixed point inside each epoch (e.g. label propagation).

        ``init(batch)`` gives round 0's state from the epoch's input; ``step(state, batch)``
        gives the next round's state with the same columns. When a round leaves the state
        unchanged (the same rows), the state is the stage's output for the epoch. Each round
        is committed to the ledger at ``Product(epoch, round)``, so status shows the round and
        a killed run resumes from its last committed round. ``step`` must be deterministic."""
        if type(max_rounds) is not int or max_rounds < 1:
            raise PipelineDefinitionError(self.name, name, "max_rounds must be at least 1")
        for what, fn in (("init", init), ("step", step)):
            if not callable(fn):
                raise PipelineDefinitionError(self.name, name, f"{what} must be a function")
        inputs = (self._input(name, input),)
        return self._add(
            IterateStage(name=name, inputs=inputs, init=init, step=step, max_rounds=max_rounds)
        )

    def feedback(self, name: str, *, delay: int) -> Stream:
        """A stream that carries a later stage's output back, ``delay`` epochs later. Connect
        it with ``connect``; a loop that does not delay (``delay=0``) is refused."""
        stream = self._add(FeedbackStage(name=name, delay=delay))
        self._feedback[name] = None
        return stream

    def connect(self, feedback: Stream, stream: Stream | str) -> None:
        name = feedback.stage
        if name not in self._feedback:
            raise PipelineDefinitionError(self.name, name, "only feedback streams are connected")
        if self._feedback[name] is not None:
            raise PipelineDefinitionError(self.name, name, "this feedback is already connected")
        source = self._input(name, stream)
        self._feedback[name] = source
        self._stages[name] = with_inputs(self._stages[name], (source,))
        self._compiled = None

    def sink(self, name: str, input: Stream | str, *, path: str | os.PathLike[str]) -> None:
        """Publish each committed epoch of ``input`` to ``path`` (Parquet, ``PATH/epoch=N``),
        atomically, after its commit (see ``pipelines.sinks``). A relative ``path`` is under the
        runtime's home (the ledger's directory); an empty one, or one that climbs out of the
        home (``..``), is refused."""
        where = check_sink_path(self.name, name, path)
        self._add(SinkStage(name=name, inputs=(self._input(name, input),), path=where))

    # -- compiled form -------------------------------------------------------------------------

    @property
    def stages(self) -> Mapping[str, Stage]:
        return dict(self._stages)

    def stage(self, name: str) -> Stage:
        if name not in self._stages:
            known = ", ".join(self._stages)
            raise PipelineDefinitionError(self.name, name, f"no such stage; stages: {known}")
        return self._stages[name]

    def graph(self) -> Graph:
        """The progress graph: one node per stage, one output port each (none for sinks);
        compiled once per definition."""
        if self._compiled is None:
            self._compiled = self._compile()
        return self._compiled

    def _compile(self) -> Graph:
        for name, source in self._feedback.items():
            if source is None:
                raise PipelineDefinitionError(self.name, name, "feedback was never connected")
        builder = GraphBuilder()
        for stage in self._stages.values():
            outputs = stage.outputs
            summaries = {(i, 0): [Delay(stage.delay)] for i in range(len(stage.inputs))}
            builder.add_node(
                stage.name,
                inputs=len(stage.inputs),
                outputs=outputs,
                summaries=summaries if outputs else {},
                workers=stage.workers,
            )
        for stage in self._stages.values():
            for port, upstream in enumerate(stage.inputs):
                builder.add_edge(Source(upstream, 0), Target(stage.name, port))
        try:
            return builder.compile()
        except CycleError as err:
            raise PipelineDefinitionError(
                self.name,
                err.cycle[0],
                f"cycle {' -> '.join(err.cycle)} does not advance time; give its feedback a delay",
            ) from err

    def downstream(self, name: str) -> list[str]:
        """The stages that read ``name``'s output, in definition order."""
        return [s.name for s in self._stages.values() if name in s.inputs]

    def register(self, ledger: Ledger, *, from_start: bool = False) -> Graph:
        """Register the graph (and the nested scopes of its stages) in ``ledger``, as anything
        that runs the pipeline or feeds it must first; returns the graph."""
        graph = self.graph()
        ledger.register(self.name, graph, from_start=from_start)
        for stage in self._stages.values():
            for scope, inner in stage.scopes(self.name):
                ledger.register(scope, inner)
        return graph
