"""Stage kinds: one frozen spec per kind, carrying its settings and the rules of its definition.

Every kind says, in one place, the time of the message its run at an epoch announces
(``output_time``), whether it holds state from epoch to epoch (``holds_state``), how it is fed
(``fed_by``), its columns, how it is described, and its nested scope if it has one. What a kind
does when it runs lives with the runtime (``pipelines.run.kinds``), found by the kind's type.
The runtime, the sensors, the CLI and the Dagster layer ask the spec; none of them switches on
a kind's name. A new kind is one new spec and its run.

    SourceStage    input with workers            (fed by send, never run)
    DimensionStage a source read as a table      (a reader at e sees its latest message <= e)
    TransformStage fn(df) of one input           (optionally delayed)
    UnionStage     all rows of several inputs    (catalogs their files when their columns match)
    JoinStage      left joined with right        (same epoch of both; a dimension as of it)
    StatefulStage  keyed state carried on        (update(batch, state); epochs strictly in order)
    AggregateStage keyed running aggregates      (sum, count, min, max of every row so far)
    IterateStage   rounds to a fixed point       (a nested scope at Product(epoch, round))
    FeedbackStage  a later stage's output back   (delayed: a loop must advance time)
    SinkStage      each epoch shown at a path    (published after its commit; no output)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from functools import reduce
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from pipelines.errors import StageFailedError
from pipelines.stages.arguments import join_kind, missing_columns
from pipelines.stages.clock import EXPLICIT, CloseRule
from pipelines.stages.functions import RoundStep, StateUpdate, Transform
from pipelines.stages.partial import PartialState
from pipelines.stages.sink_formats import SinkFormat
from progress import Graph, Time
from progress.scope import scope_graph, scope_name

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

DEFAULT_MAX_ROUNDS = 100

Columns = tuple[str, ...] | None
"""A frame's columns when they are known without asking the engine (its files are read with a
known schema), else None."""

ColumnsOf = Callable[[str], Columns]
"""The output columns of a stage, by name, when its definition fixes them."""


class Feed(Enum):
    """How a stage's output comes to be: the runtime asks this, never the kind's type."""

    RUN = "run"
    """A stage run computes it, once per epoch."""
    SEND = "send"
    """Input workers send it (``send``, ``advance``, ``close``)."""
    REPLAY = "replay"
    """Captured streams feed it (``Runtime.replay``); ``send`` is not for it."""


@dataclass(frozen=True, kw_only=True)
class Stage:
    """What every stage has: a name, the stages it reads (in port order), and the settings
    below, which a kind that has them declares as its own (the others keep the defaults)."""

    name: str
    inputs: tuple[str, ...] = ()
    delay: int = field(default=0, init=False)
    """Epochs between a run's epoch and the time of the message it announces."""
    workers: int = field(default=0, init=False)
    """Input workers: each holds a capability on the stage's output."""
    schema: StructType | None = field(default=None, init=False)
    """The declared columns of its output, when it declares them."""
    key: tuple[str, ...] = field(default=(), init=False)
    """Key columns: never null in a source, the state's key in a stateful stage."""
    partial: PartialState | None = field(default=None, init=False)
    """For a keyed stage that keeps only the keys that are read: how (see
    ``pipelines.stages.partial``)."""
    materialize: bool = field(default=True, init=False)
    """Whether its runs write their output; a transform's may not (``pipelines.run.ephemeral``)."""

    kind: ClassVar[str]
    """The kind's name, as shown to people (the catalog, metadata). Never switched on."""
    holds_state: ClassVar[bool] = False
    """Whether its run at an epoch reads state the epoch before left: then it runs one epoch at
    a time, in order, and one run of it at a time in any process."""
    fed_by: ClassVar[Feed] = Feed.RUN
    """How its output comes to be: by its runs, by workers' ``send``, or by a replay."""
    outputs: ClassVar[int] = 1
    """Its output ports (0 or 1)."""
    drops_rows: ClassVar[bool] = False
    """Whether its output is written as computed, row for row, so that a ``drop`` expectation
    can keep failing rows out of it (``pipelines.stages.expectations``)."""
    catalogs_inputs: ClassVar[bool] = False
    """Whether its output may be its inputs' files as they are (then they are laid out for the
    stages that read it: ``pipelines.run.layout``)."""

    @property
    def is_source(self) -> bool:
        """Whether it is fed from outside (by workers or a replay) instead of run."""
        return self.fed_by is not Feed.RUN

    @property
    def code(self) -> Callable[..., object] | None:
        """The user's function that defines what the stage computes, if any."""
        return None

    def output_time(self, epoch: Time) -> Time:
        """The time of the message this stage's run at ``epoch`` announces (later by its
        delay; an epoch of an inner scope is not shifted)."""
        return epoch + self.delay if isinstance(epoch, int) else epoch

    def lineage(self) -> tuple[str, ...]:
        """The stages it depends on in the asset graph (each once)."""
        return tuple(dict.fromkeys(self.inputs))

    def columns(self, of: ColumnsOf) -> tuple[str, ...] | None:
        """The names of its output columns when its definition fixes them (``of`` gives those
        of another stage), else None: what a function returns is known once it runs."""
        return tuple(self.schema.fieldNames()) if self.schema is not None else None

    def describe(self) -> str:
        """What the stage is, in a line, for the catalog (its function's docstring aside)."""
        text = self.summary()
        if self.delay:
            text += f". Its output for epoch t belongs to epoch t + {self.delay}"
        return text

    def summary(self) -> str:
        """The kind in words (a kind with settings worth showing says them)."""
        return self.kind.capitalize()

    def scopes(self, pipeline: str) -> list[tuple[str, Graph]]:
        """Nested scopes the ledger tracks for this stage: ``(ledger name, graph)``."""
        return []

    def plan(self, frames: Sequence[DataFrame | None]) -> DataFrame | None:
        """Its output for input ``frames``, as a Spark plan that is analysed, never run: how the
        columns of a stage that declares none are found before it has any data. Each frame is
        empty; ``None`` stands for an input whose columns are not known yet (a loop's feedback
        before its first message). None when its columns cannot be told this way."""
        return None


@dataclass(frozen=True, kw_only=True)
class SourceStage(Stage):
    """An input with ``workers`` independent producers; ``key`` columns may not be null."""

    schema: StructType
    workers: int = 1
    key: tuple[str, ...] = ()
    close: CloseRule = EXPLICIT
    """How its epochs close: by its workers, some time after each epoch ends, or by markers."""

    kind: ClassVar[str] = "source"
    drops_rows: ClassVar[bool] = True
    fed_by: ClassVar[Feed] = Feed.SEND

    def describe(self) -> str:
        return (
            f"Source with {self.workers} worker(s); data arrives through its input handles "
            "(send, advance, close), not through Dagster"
        )


@dataclass(frozen=True, kw_only=True)
class DimensionStage(SourceStage):
    """A source whose content at epoch e is its latest message at or before e: a table that
    changes rarely. A message sent at epoch d replaces the table from d on; a stage reading it
    at epoch e reads, per worker, that worker's messages at its latest epoch <= e with data
    (the union of the workers' tables). Epochs it seals empty leave the table as it was."""

    kind: ClassVar[str] = "dimension"

    def describe(self) -> str:
        return (
            f"Dimension source with {self.workers} worker(s): its content at epoch e is each "
            "worker's latest message at or before e, and a message sent at epoch d replaces "
            "the table from d on; data arrives through its input handles (send, advance, "
            "close), not through Dagster"
        )


@dataclass(frozen=True, kw_only=True)
class TransformStage(Stage):
    """Any DataFrame-to-DataFrame function of one epoch's input, optionally delayed."""

    fn: Transform
    delay: int = 0
    """With ``delay=k`` the output of epoch ``t`` belongs to epoch ``t + k``."""
    materialize: bool = True
    """False: never written; recomputed inside the stages that read it
    (``pipelines.run.ephemeral``)."""

    kind: ClassVar[str] = "transform"
    drops_rows: ClassVar[bool] = True

    @property
    def code(self) -> Callable[..., object]:
        return self.fn

    def summary(self) -> str:
        if self.materialize:
            return super().summary()
        return (
            "Transform, not materialized: recomputed inside each stage that reads it, never written"
        )

    def plan(self, frames: Sequence[DataFrame | None]) -> DataFrame | None:
        return None if frames[0] is None else self.fn(frames[0])

    def recompute(
        self,
        frames: Sequence[DataFrame],
        epoch: Time,
        columns: Sequence[Columns] = (),
    ) -> DataFrame:
        """Its output from its input's frame (in a reader's run when it is not materialized)."""
        return self.fn(frames[0])


@dataclass(frozen=True, kw_only=True)
class UnionStage(Stage):
    """All rows of several inputs with the same columns (matched by name)."""

    kind: ClassVar[str] = "union"
    drops_rows: ClassVar[bool] = True
    catalogs_inputs: ClassVar[bool] = True

    def summary(self) -> str:
        return "Union of its inputs"

    def columns(self, of: ColumnsOf) -> tuple[str, ...] | None:
        """Those of its first input whose columns are known (inputs are matched by name)."""
        return next((c for c in map(of, self.inputs) if c is not None), None)

    def plan(self, frames: Sequence[DataFrame | None]) -> DataFrame | None:
        """The union of the inputs whose columns are known (the others add no rows yet)."""
        known = [frame for frame in frames if frame is not None]
        return reduce(lambda a, b: a.unionByName(b), known) if known else None


@dataclass(frozen=True, kw_only=True)
class JoinStage(Stage):
    """The rows of one epoch of the left input joined with the same epoch of the right (of a
    dimension source: its table as of that epoch)."""

    on: tuple[str, ...]
    how: str = "inner"
    materialize: bool = True
    """False: never written; recomputed inside the stages that read it
    (``pipelines.run.ephemeral``)."""

    kind: ClassVar[str] = "join"
    drops_rows: ClassVar[bool] = True

    def summary(self) -> str:
        if self.materialize:
            return f"Join on {', '.join(self.on)}"
        return (
            f"Join on {', '.join(self.on)}, not materialized: recomputed inside each stage that "
            "reads it, never written"
        )

    def columns(self, of: ColumnsOf) -> tuple[str, ...] | None:
        """As Spark joins on column names: the ``on`` columns, then the others of the left,
        then the others of the right (a semi or anti join keeps the left's alone)."""
        left, right = (of(name) for name in self.inputs)
        if join_kind(self.how) in {"leftsemi", "leftanti"}:
            return left
        if left is None or right is None:
            return None
        others = [c for c in (*left, *right) if missing_columns([c], self.on)]
        return (*self.on, *others)

    def plan(self, frames: Sequence[DataFrame | None]) -> DataFrame | None:
        left, right = frames
        if left is None or right is None:
            return None
        return left.join(right, on=list(self.on), how=self.how)

    def recompute(
        self,
        frames: Sequence[DataFrame],
        epoch: Time,
        columns: Sequence[Columns] = (),
    ) -> DataFrame:
        """The join of the two frames; a missing ``on`` column is refused naming the side.
        ``columns``: each frame's columns where they are known without asking the engine (on
        Spark Connect, ``DataFrame.columns`` is a round trip to the server)."""
        left, right = frames
        known = list(columns) or [None, None]
        for side, upstream, frame, given in zip(
            ("left", "right"), self.inputs, frames, known, strict=True
        ):
            have = tuple(frame.columns) if given is None else given
            missing = missing_columns(self.on, have)
            if missing:  # before Spark's own error, which names neither side nor stage
                raise StageFailedError(
                    self.name,
                    epoch,
                    f"join column {missing[0]!r} (on={list(self.on)}) is not in the {side} "
                    f"input {upstream!r}, whose columns are {', '.join(have)}",
                    column=missing[0],
                )
        return left.join(right, on=list(self.on), how=self.how)


@dataclass(frozen=True, kw_only=True)
class KeyedStage(Stage):
    """A stage with keyed state carried from epoch to epoch, processed strictly in order: its
    output at an epoch is the new state rows of the keys its input moved. ``lookup`` reads its
    state by key; a partial one keeps only the keys that are read (``pipelines.stages.partial``)."""

    key: tuple[str, ...]
    partial: PartialState | None = None

    holds_state: ClassVar[bool] = True

    def summary(self) -> str:
        text = f"{self.kind.capitalize()} stage keyed by {', '.join(self.key)} " + self.carries
        if self.partial is not None:
            bound = self.partial.max_keys
            text += "; partial: keeps only the keys that are read" + (
                f" (at most {bound})" if bound else ""
            )
        return text

    carries: ClassVar[str] = "(state carries to the next epoch)"


@dataclass(frozen=True, kw_only=True)
class StatefulStage(KeyedStage):
    """A keyed stage whose state carries from epoch to epoch, processed strictly in order."""

    schema: StructType
    """The state's columns (``key`` among them): also the stage's output."""
    update: StateUpdate

    kind: ClassVar[str] = "stateful"

    @property
    def code(self) -> Callable[..., object]:
        return self.update


@dataclass(frozen=True, kw_only=True)
class IterateStage(Stage):
    """Rounds of Spark jobs to a fixed point inside each epoch (see ``pipelines.run.iteration``)."""

    init: Transform
    step: RoundStep
    max_rounds: int = DEFAULT_MAX_ROUNDS

    kind: ClassVar[str] = "iterate"

    @property
    def code(self) -> Callable[..., object]:
        return self.step

    def summary(self) -> str:
        return "Iterative stage: rounds to a fixed point within each epoch"

    def scopes(self, pipeline: str) -> list[tuple[str, Graph]]:
        return [(scope_name(pipeline, self.name), scope_graph())]

    def plan(self, frames: Sequence[DataFrame | None]) -> DataFrame | None:
        """Round 0's state: every round has its columns."""
        return None if frames[0] is None else self.init(frames[0])


@dataclass(frozen=True, kw_only=True)
class FeedbackStage(Stage):
    """A later stage's output carried back ``delay`` epochs later (``inputs`` is empty until
    ``Pipeline.connect``)."""

    delay: int

    kind: ClassVar[str] = "feedback"

    def lineage(self) -> tuple[str, ...]:
        """None: its input closes a loop, and Dagster's asset graph has no cycles (the loop's
        delay keeps it sound)."""
        return ()

    def describe(self) -> str:
        return (
            f"Feedback: carries {', '.join(self.inputs)}'s output {self.delay} epoch(s) later "
            "(that edge is left out of the asset graph: it closes a loop)"
        )

    def plan(self, frames: Sequence[DataFrame | None]) -> DataFrame | None:
        return frames[0]


@dataclass(frozen=True, kw_only=True)
class SinkStage(Stage):
    """Each committed epoch of its input, published after its commit: to ``path`` as Parquet
    (an ``epoch=N`` link per epoch) or as a Delta table, or to the Iceberg ``table`` of a
    ``catalog`` (``format``); a relative ``path`` is under the runtime's home (see
    ``pipelines.run.sinks``)."""

    path: str
    format: SinkFormat = SinkFormat.PARQUET
    table: str | None = None
    catalog: tuple[tuple[str, str], ...] = ()

    kind: ClassVar[str] = "sink"
    drops_rows: ClassVar[bool] = True
    outputs: ClassVar[int] = 0

    def summary(self) -> str:
        relative = not Path(self.path).expanduser().is_absolute()
        where = f"{self.path} under the runtime's home" if relative else self.path
        if self.format is SinkFormat.PARQUET:
            return f"Sink: publishes each committed epoch to {where} (epoch=N)"
        if self.format is SinkFormat.ICEBERG:
            return f"Sink: publishes each committed epoch to the iceberg table {self.table}"
        return f"Sink: publishes each committed epoch to the {self.format.value} table at {where}"


def with_inputs(stage: Stage, inputs: tuple[str, ...]) -> Stage:
    """The same stage reading ``inputs`` (a feedback stage, once connected)."""
    return dataclasses.replace(stage, inputs=inputs)
