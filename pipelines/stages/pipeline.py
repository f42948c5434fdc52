"""The pipeline API: sources, stages and the streams between them, compiled to a progress graph.

    bank = Pipeline("bank")
    cards = bank.source("card_payments", schema=CARDS, workers=3, key=["payment_id"])
    valid = bank.transform("validate_cards", cards, fn=lambda df: df.where("amount > 0"))
    totals = bank.transform("category_totals", valid, fn=per_category)

A stage's logic is an ordinary function over Spark DataFrames for one epoch. Every definition
error (an unknown input, a duplicate name, a name that is not an identifier, a function that is
not callable, a schema that is not a Spark ``StructType``, a key or join column that is not
there, a join type Spark does not know, a cycle that does not advance time) is raised when the
pipeline is defined or compiled, never at run time. Columns are checked wherever the definition
fixes them (see ``Pipeline.columns``); a join on the output of a function is checked by its run,
before Spark.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

from pipelines.errors import PipelineDefinitionError, UnknownStageError
from pipelines.stages.aggregate import AggregateStage, aggregations
from pipelines.stages.arguments import (
    check_columns,
    check_function,
    check_input_keys,
    check_join_type,
    check_key,
    check_materialize,
    check_name,
    check_schema,
    check_workers,
    missing_columns,
)
from pipelines.stages.clock import (
    EXPLICIT,
    AfterEpochEnd,
    CloseRule,
    DoneMarkers,
    EpochClock,
    Explicit,
)
from pipelines.stages.expectations import Expectation, OnFail, check_freshness, expectation
from pipelines.stages.families import check_reader
from pipelines.stages.functions import RoundStep, StateUpdate, Transform
from pipelines.stages.graph import compile_graph
from pipelines.stages.kinds import (
    DEFAULT_MAX_ROUNDS,
    DimensionStage,
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
from pipelines.stages.partial import PartialState, partial_setting
from pipelines.stages.replayed import ReplayStage
from pipelines.stages.sink_formats import SinkFormat, check_sink_format, check_sink_target
from progress import Graph

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

    from progress.ledger import Ledger

__all__ = ["Pipeline", "RoundStep", "Stage", "StateUpdate", "Stream", "Transform", "check_name"]


@dataclass(frozen=True)
class Stream:
    """The output of a stage: what other stages read."""

    pipeline: str
    stage: str


class Pipeline:
    """A pipeline under definition. ``compile()`` gives its progress graph."""

    def __init__(self, name: str, *, clock: EpochClock | None = None) -> None:
        """``clock`` schedules the pipeline's epochs (see ``pipelines.stages.clock``): it opens
        them, and closes those of sources whose close rule is time-based."""
        self.name = check_name(name, name, "pipeline")
        self.clock = clock
        self.definition: str | None = None
        """Where this pipeline's code is, an example name or ``module:attribute``, when whoever
        loaded it knows (``pipelines.cli.references.load`` sets it); registering records it."""
        self._stages: dict[str, Stage] = {}
        self._feedback: dict[str, str | None] = {}
        self._expectations: dict[str, tuple[Expectation, ...]] = {}
        self._freshness: dict[str, timedelta] = {}
        self._compiled: Graph | None = None

    # -- definition ----------------------------------------------------------------------------

    def _add(self, stage: Stage, freshness: timedelta | None = None) -> Stream:
        """Add ``stage`` (with its ``freshness``, when it declares one)."""
        check_name(self.name, stage.name, "source" if stage.is_source else "stage")
        if stage.name in self._stages:
            raise PipelineDefinitionError(
                self.name, stage.name, "a stage of that name exists", argument="name"
            )
        if type(stage.delay) is not int or stage.delay < 0:
            raise PipelineDefinitionError(
                self.name, stage.name, "delay must be an int >= 0", argument="delay"
            )
        for upstream in stage.inputs:
            check_reader(self.name, stage, self._stages[upstream])
        if freshness is not None:
            self._freshness[stage.name] = check_freshness(self.name, stage, freshness)
        self._stages[stage.name] = stage
        self._compiled = None
        return Stream(self.name, stage.name)

    def _input(self, stage: str, stream: Stream | str, argument: str = "input") -> str:
        """The stage ``stream`` names, which ``stage`` reads (given as ``argument``)."""
        name = stream.stage if isinstance(stream, Stream) else stream
        if isinstance(stream, Stream) and stream.pipeline != self.name:
            raise PipelineDefinitionError(
                self.name,
                stage,
                f"input {name!r} belongs to pipeline {stream.pipeline!r}",
                argument=argument,
            )
        if name not in self._stages:
            known = ", ".join(self._stages) or "(none)"
            raise PipelineDefinitionError(
                self.name,
                stage,
                f"unknown input {name!r}; defined so far: {known}",
                argument=argument,
            )
        if not self._stages[name].outputs:
            raise PipelineDefinitionError(
                self.name, stage, f"{name!r} is a sink: nothing reads it", argument=argument
            )
        return name

    def source(
        self,
        name: str,
        *,
        schema: StructType,
        workers: int = 1,
        key: Sequence[str] = (),
        close: CloseRule = EXPLICIT,
        freshness: timedelta | None = None,
    ) -> Stream:
        """An input with ``workers`` independent producers; ``key`` columns may not be null.
        ``close`` says how its epochs close: by its workers (the default), some time after each
        epoch ends (the pipeline needs a clock), or by each worker's done-marker. A stage reading
        it at epoch t reads the messages sent at t."""
        return self._add(
            self._input_stage(
                SourceStage, name, schema=schema, workers=workers, key=key, close=close
            ),
            freshness,
        )

    def dimension(
        self,
        name: str,
        *,
        schema: StructType,
        workers: int = 1,
        key: Sequence[str] = (),
        close: CloseRule = EXPLICIT,
        freshness: timedelta | None = None,
    ) -> Stream:
        """A dimension source: a table that changes rarely (accounts, users). Its content at
        epoch e is its latest message at or before e: a message sent at epoch d replaces the
        table from d on, until the next one, and after ``close()`` the last table stays. A stage
        reading it at epoch t reads the table as of t, per worker its latest messages with data
        (the workers' tables together). Its workers, ``key`` and ``close`` are a source's."""
        return self._add(
            self._input_stage(
                DimensionStage, name, schema=schema, workers=workers, key=key, close=close
            ),
            freshness,
        )

    def replay(
        self,
        name: str,
        directories: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
        *,
        workers: int = 1,
        freshness: timedelta | None = None,
    ) -> Stream:
        """A source fed by one or many captured streams (capture directories, see
        ``pipelines.capture.log``): stream i goes to worker ``i % workers``, a worker with no
        stream closes at once, and the source's frontier passes an epoch only after every
        stream has released it. Its columns are the captures' (they must agree); a missing
        directory, or one without a capture, is refused here. ``Runtime.replay()`` (which
        ``run()`` calls first) feeds the captured events."""
        from pipelines.capture.sources import replay_stage  # the captures' headers say its columns

        check_name(self.name, name, "source")
        return self._add(replay_stage(self.name, name, directories, workers), freshness)

    def _input_stage(
        self,
        kind: type[SourceStage],
        name: str,
        *,
        schema: StructType,
        workers: int,
        key: Sequence[str],
        close: CloseRule,
    ) -> SourceStage:
        """A source spec of ``kind``, or an error naming what does not fit."""
        check_name(self.name, name, "source")
        what = "source" if kind is SourceStage else f"{kind.kind} source"
        workers = check_workers(self.name, name, workers, what)
        schema = check_schema(self.name, name, schema)
        keys = check_key(self.name, name, key, schema, required=False)
        if not isinstance(close, Explicit | AfterEpochEnd | DoneMarkers):
            raise PipelineDefinitionError(
                self.name,
                name,
                f"close must be Explicit, AfterEpochEnd or DoneMarkers: {close!r}",
                argument="close",
            )
        if isinstance(close, AfterEpochEnd) and self.clock is None:
            raise PipelineDefinitionError(
                self.name,
                name,
                "closing after each epoch ends needs an epoch clock: Pipeline(..., clock=...)",
                argument="close",
            )
        return kind(name=name, schema=schema, workers=workers, key=keys, close=close)

    def replayed_sources(self) -> list[ReplayStage]:
        """Its sources fed by captured streams (``replay``), in definition order."""
        return [s for s in self._stages.values() if isinstance(s, ReplayStage)]

    def close_rule(self, source: str) -> CloseRule:
        """How ``source``'s epochs close."""
        stage = self.stage(source)
        return stage.close if isinstance(stage, SourceStage) else EXPLICIT

    def transform(
        self,
        name: str,
        input: Stream | str,
        fn: Transform,
        *,
        delay: int = 0,
        materialize: bool = True,
        freshness: timedelta | None = None,
    ) -> Stream:
        """Any DataFrame-to-DataFrame function of one epoch's input. With ``delay=k`` the output
        of epoch ``t`` belongs to epoch ``t + k``. With ``materialize=False`` its output is never
        written: each stage that reads it applies ``fn`` to its input inside its own run
        (``pipelines.run.ephemeral``); keyed stages cannot read such a transform."""
        check_name(self.name, name)
        check_function(self.name, name, "fn", fn)
        check_materialize(self.name, name, materialize)
        if not materialize and delay:
            raise PipelineDefinitionError(
                self.name,
                name,
                "a delayed transform is materialized: its output belongs to a later epoch than "
                "its input, so it is written when it runs",
                argument="materialize",
            )
        inputs = (self._input(name, input),)
        return self._add(
            TransformStage(name=name, inputs=inputs, fn=fn, delay=delay, materialize=materialize),
            freshness,
        )

    def union(self, name: str, *inputs: Stream | str, freshness: timedelta | None = None) -> Stream:
        """All rows of several inputs with the same columns (matched by name)."""
        check_name(self.name, name)
        if len(inputs) < 2:
            raise PipelineDefinitionError(
                self.name, name, "a union needs at least two inputs", argument="inputs"
            )
        names = tuple(self._input(name, i, "inputs") for i in inputs)
        known = [(i, c) for i in names if (c := self.columns(i)) is not None]
        for other, columns in known[1:]:
            first, have = known[0]
            if missing_columns(have, columns) or missing_columns(columns, have):
                raise PipelineDefinitionError(
                    self.name,
                    name,
                    f"a union's inputs need the same columns: {first!r} has "
                    f"{', '.join(have)}; {other!r} has {', '.join(columns)}",
                    argument="inputs",
                )
        return self._add(UnionStage(name=name, inputs=names), freshness)

    def join(
        self,
        name: str,
        left: Stream | str,
        right: Stream | str,
        *,
        on: Sequence[str],
        how: str = "inner",
        materialize: bool = True,
        freshness: timedelta | None = None,
    ) -> Stream:
        """The rows of one epoch of ``left`` joined with the same epoch of ``right`` (of a
        dimension source: its table as of that epoch) on the columns ``on`` (which both sides
        need); ``how`` is one of Spark's join types. With ``materialize=False`` its output is
        never written: each stage that reads it joins its inputs inside its own run
        (``pipelines.run.ephemeral``); keyed stages cannot read such a join."""
        check_name(self.name, name)
        check_materialize(self.name, name, materialize)
        columns = check_columns(self.name, name, "on", on)
        if not columns:
            raise PipelineDefinitionError(
                self.name, name, "a join needs columns to join on", argument="on"
            )
        check_join_type(self.name, name, how)
        inputs = (self._input(name, left, "left"), self._input(name, right, "right"))
        for side, upstream in zip(("left", "right"), inputs, strict=True):
            have = self.columns(upstream)
            missing = missing_columns(columns, have) if have is not None else []
            if missing:
                raise PipelineDefinitionError(
                    self.name,
                    name,
                    f"join column(s) {missing} not in the {side} input {upstream!r}, whose "
                    f"columns are {', '.join(have or ())}",
                    argument="on",
                )
        return self._add(
            JoinStage(name=name, inputs=inputs, on=columns, how=how, materialize=materialize),
            freshness,
        )

    def stateful(
        self,
        name: str,
        input: Stream | str,
        *,
        key: Sequence[str],
        schema: StructType,
        update: StateUpdate,
        partial: bool | PartialState = False,
        freshness: timedelta | None = None,
    ) -> Stream:
        """A keyed stage whose state carries from epoch to epoch, processed strictly in order.

        ``schema`` is the state's columns (``key`` among them). ``update(batch, state)`` gets
        one epoch's input and the state rows of the keys in it (absent for new keys) and
        returns the new state rows of those keys: they replace the old ones and are the
        stage's output for the epoch. ``update`` must treat each key on its own (a key's new
        rows depend only on its own input and state).

        ``partial=True`` (or ``PartialState(max_keys=N)``) keeps only the keys that are read
        (see ``Runtime.lookup``); only partial stages keyed alike may read its output."""
        check_name(self.name, name)
        schema = check_schema(self.name, name, schema)
        keys = check_key(self.name, name, key, schema, required=True)
        check_function(self.name, name, "update", update)
        inputs = (self._input(name, input),)
        upstream = self.stage(inputs[0])
        check_input_keys(
            self.name, name, upstream, keys, schema=schema, have=self.columns(upstream.name)
        )
        return self._add(
            StatefulStage(
                name=name,
                inputs=inputs,
                key=keys,
                schema=schema,
                update=update,
                partial=partial_setting(self.name, name, partial),
            ),
            freshness,
        )

    def aggregate(
        self,
        name: str,
        input: Stream | str,
        *,
        key: Sequence[str],
        aggs: Mapping[str, tuple[str, str | None]],
        partial: bool | PartialState = False,
        freshness: timedelta | None = None,
    ) -> Stream:
        """Keyed running aggregates: for each key, ``aggs`` (``{name: (function, column)}``,
        functions ``sum``, ``count``, ``min``, ``max``; ``("count", None)`` counts rows) over
        every input row of the key up to the epoch. Its output at an epoch is the new values of
        the keys that epoch moved; ``partial`` as for ``stateful``."""
        check_name(self.name, name)
        keys = check_columns(self.name, name, "key", key)
        if not keys:
            raise PipelineDefinitionError(
                self.name, name, "an aggregate stage needs key columns", argument="key"
            )
        inputs = (self._input(name, input),)
        upstream = self.stage(inputs[0])
        check_input_keys(
            self.name, name, upstream, keys, schema=None, have=self.columns(upstream.name)
        )
        specs = aggregations(self.name, name, aggs, keys, self.columns(inputs[0]))
        return self._add(
            AggregateStage(
                name=name,
                inputs=inputs,
                key=keys,
                aggs=specs,
                partial=partial_setting(self.name, name, partial),
            ),
            freshness,
        )

    def iterate(
        self,
        name: str,
        input: Stream | str,
        *,
        init: Transform,
        step: RoundStep,
        max_rounds: int = DEFAULT_MAX_ROUNDS,
        freshness: timedelta | None = None,
    ) -> Stream:
        """Rounds of Spark jobs to a fixed point inside each epoch (e.g. label propagation).

        ``init(batch)`` gives round 0's state from the epoch's input; ``step(state, batch)``
        gives the next round's state with the same columns. When a round leaves the state
        unchanged (the same rows), the state is the stage's output for the epoch. Each round
        is committed to the ledger at ``Product(epoch, round)``, so status shows the round and
        a killed run resumes from its last committed round. ``step`` must be deterministic."""
        check_name(self.name, name)
        if type(max_rounds) is not int or max_rounds < 1:
            raise PipelineDefinitionError(
                self.name, name, "max_rounds must be at least 1", argument="max_rounds"
            )
        check_function(self.name, name, "init", init)
        check_function(self.name, name, "step", step)
        inputs = (self._input(name, input),)
        return self._add(
            IterateStage(name=name, inputs=inputs, init=init, step=step, max_rounds=max_rounds),
            freshness,
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
        source = self._input(name, stream, "stream")
        check_reader(self.name, self._stages[name], self._stages[source])
        self._feedback[name] = source
        self._stages[name] = with_inputs(self._stages[name], (source,))
        self._compiled = None

    def sink(
        self,
        name: str,
        input: Stream | str,
        *,
        path: str | os.PathLike[str] | None = None,
        format: SinkFormat | str = SinkFormat.PARQUET,
        table: str | None = None,
        catalog: Mapping[str, str] | None = None,
    ) -> None:
        """Publish each committed epoch of ``input`` after its commit (``pipelines.run.sinks``):
        to ``path`` as Parquet (``PATH/epoch=N``) or a Delta table (``format="delta"``), or to
        the Iceberg ``table`` (``namespace.name``) of a pyiceberg ``catalog``; one table commit
        per epoch. A relative ``path`` is under the runtime's home; ``..`` out of it is refused."""
        chosen = check_sink_format(self.name, name, format)
        where, ident, props = check_sink_target(
            self.name, name, chosen, path=path, table=table, catalog=catalog
        )
        ins = (self._input(name, input),)
        self._add(
            SinkStage(name=name, inputs=ins, path=where, format=chosen, table=ident, catalog=props)
        )

    def expect(
        self,
        stage: Stream | str,
        name: str,
        condition: str | None = None,
        *,
        unique: Sequence[str] | None = None,
        on_fail: OnFail | str = OnFail.WARN,
    ) -> Expectation:
        """Check every epoch of ``stage``'s output: ``condition`` (Spark SQL, true for a good
        row) or ``unique`` columns; a failing row warns, is dropped into the stage's
        quarantine, or fails the run (``on_fail``: see ``pipelines.stages.expectations``)."""
        target = self._named(stage)
        taken = [e.name for e in self._expectations.get(target.name, ())]
        made = expectation(
            self.name,
            target,
            name,
            condition=condition,
            unique=unique,
            on_fail=on_fail,
            columns=self.columns(target.name),
            taken=taken,
        )
        self._expectations[target.name] = (*self._expectations.get(target.name, ()), made)
        return made

    def expectations(self, stage: str | None = None) -> tuple[Expectation, ...]:
        """The expectations of ``stage`` (of every stage when None), in definition order."""
        if stage is not None:
            return self._expectations.get(self.stage(stage).name, ())
        return tuple(e for found in self._expectations.values() for e in found)

    def freshness(self, stage: Stream | str, within: timedelta) -> None:
        """``stage`` is behind when its oldest epoch that is not final has been open longer
        than ``within`` (``Runtime.lag``; the frontier sensor names it). The same as the
        ``freshness=`` its definition can give, for a stage defined elsewhere (``load``)."""
        target = self._named(stage)
        self._freshness[target.name] = check_freshness(self.name, target, within)

    @property
    def fresh_within(self) -> Mapping[str, timedelta]:
        """Each stage's declared freshness."""
        return dict(self._freshness)

    def _named(self, stage: Stream | str) -> Stage:
        if isinstance(stage, Stream) and stage.pipeline != self.name:
            raise PipelineDefinitionError(
                self.name, stage.stage, f"belongs to pipeline {stage.pipeline!r}", argument="stage"
            )
        return self.stage(stage.stage if isinstance(stage, Stream) else stage)

    # -- compiled form -------------------------------------------------------------------------

    @property
    def stages(self) -> Mapping[str, Stage]:
        return dict(self._stages)

    def columns(self, name: str) -> tuple[str, ...] | None:
        """The output columns of stage ``name`` when the definition fixes them: a source's or
        stateful stage's schema, a union or join of inputs whose columns are known; None where
        a function's output decides them."""
        return self.stage(name).columns(self.columns)

    def stage(self, name: str) -> Stage:
        """The spec of stage ``name``; ``UnknownStageError`` (with the closest names) if none."""
        if name not in self._stages:
            raise UnknownStageError(self.name, name, list(self._stages))
        return self._stages[name]

    def graph(self) -> Graph:
        """The progress graph: one node per stage, one output port each (none for sinks);
        compiled once per definition."""
        if self._compiled is None:
            self._compiled = compile_graph(self.name, self._stages, self._feedback)
        return self._compiled

    def downstream(self, name: str) -> list[str]:
        """The stages that read ``name``'s output, in definition order."""
        return [s.name for s in self._stages.values() if name in s.inputs]

    def register(self, ledger: Ledger, *, from_start: bool = False) -> Graph:
        """Register the graph (and the nested scopes of its stages) in ``ledger``, as anything
        that runs the pipeline or feeds it must first, with its ``definition`` when known;
        returns the graph."""
        graph = self.graph()
        ledger.register(self.name, graph, from_start=from_start, definition=self.definition)
        for stage in self._stages.values():
            for scope, inner in stage.scopes(self.name):
                ledger.register(scope, inner)
        return graph

    def registered_in(self, ledger: Ledger) -> bool:
        """Whether ``register`` would change nothing in ``ledger``: the graph, its scopes and
        the definition (when known) are recorded as they are."""
        with ledger.session():
            if not ledger.registered(self.name, self.graph(), definition=self.definition):
                return False
            return all(
                ledger.registered(scope, inner)
                for stage in self._stages.values()
                for scope, inner in stage.scopes(self.name)
            )
