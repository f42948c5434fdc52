"""Stage kinds: one frozen spec per kind, carrying its settings and its behaviour.

Every kind says, in one place, how it computes an epoch (``compute``), the time of the message
its run at an epoch announces (``output_time``), whether it holds state from epoch to epoch
(``holds_state``), how it is described, and anything else only it does (the nested scope of an
iterative stage, the rewind of a stateful stage before a revision). The runtime, the sensors,
the CLI and the Dagster layer ask the spec; none of them switches on a kind's name. A new kind
is one new spec.

    SourceStage    input with workers            (fed by send, never run)
    TransformStage fn(df) of one input           (optionally delayed)
    UnionStage     all rows of several inputs    (catalogs their files when their columns match)
    JoinStage      left joined with right        (same epoch of both)
    StatefulStage  keyed state carried on        (update(batch, state); epochs strictly in order)
    IterateStage   rounds to a fixed point       (a nested scope at Product(epoch, round))
    FeedbackStage  a later stage's output back   (delayed: a loop must advance time)
    SinkStage      each epoch shown at a path    (published after its commit; no output)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import reduce
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from pipelines.carry import StateUpdate, carry
from pipelines.clock import EXPLICIT, CloseRule
from pipelines.iteration import Rounds, RoundStep, Transform, pending_paths, scope_graph
from pipelines.sinks import SinkDirectory, resolve_sink_path
from pipelines.work import Produced, StageWork, Written
from progress import Graph, Time
from progress.ledger import Ledger, scope_name
from state_store import KeyedState

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

DEFAULT_MAX_ROUNDS = 100


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

    kind: ClassVar[str]
    """The kind's name, as shown to people (the catalog, metadata). Never switched on."""
    holds_state: ClassVar[bool] = False
    """Whether its run at an epoch reads state the epoch before left: then it runs one epoch at
    a time, in order, and one run of it at a time in any process."""
    is_source: ClassVar[bool] = False
    """Whether it is fed by input workers instead of run."""
    outputs: ClassVar[int] = 1
    """Its output ports (0 or 1)."""

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

    def resumable_paths(self, ledger: Ledger, pipeline: str) -> list[str]:
        """Data a new run of this stage may resume from (kept by garbage collection)."""
        return []

    def revision_epochs(
        self, state: KeyedState, pipeline: str, requested: Sequence[Time], done: Sequence[Time]
    ) -> list[Time]:
        """The epochs a revision of ``requested`` recomputes, in order (getting ready for it)."""
        return sorted(set(requested))

    def compute(self, work: StageWork) -> Produced:
        """The stage's output message for ``work.epoch``."""
        raise NotImplementedError(f"stage {self.name!r} ({self.kind}) is not run")


@dataclass(frozen=True, kw_only=True)
class SourceStage(Stage):
    """An input with ``workers`` independent producers; ``key`` columns may not be null."""

    schema: StructType
    workers: int = 1
    key: tuple[str, ...] = ()
    close: CloseRule = EXPLICIT
    """How its epochs close: by its workers, some time after each epoch ends, or by markers."""

    kind: ClassVar[str] = "source"
    is_source: ClassVar[bool] = True

    def describe(self) -> str:
        return (
            f"Source with {self.workers} worker(s); data arrives through its input handles "
            "(send, advance, close), not through Dagster"
        )


@dataclass(frozen=True, kw_only=True)
class TransformStage(Stage):
    """Any DataFrame-to-DataFrame function of one epoch's input, optionally delayed."""

    fn: Transform
    delay: int = 0
    """With ``delay=k`` the output of epoch ``t`` belongs to epoch ``t + k``."""

    kind: ClassVar[str] = "transform"

    @property
    def code(self) -> Callable[..., object]:
        return self.fn

    def compute(self, work: StageWork) -> Produced:
        return work.write(self.fn(work.frames[0]))


@dataclass(frozen=True, kw_only=True)
class UnionStage(Stage):
    """All rows of several inputs with the same columns (matched by name)."""

    kind: ClassVar[str] = "union"

    def summary(self) -> str:
        return "Union of its inputs"

    def compute(self, work: StageWork) -> Produced:
        """Inputs with the same columns and types are their committed files, as they are: the
        output catalogs them again (attempts are immutable), with no copy. Otherwise, or when
        no input has data, Spark writes the union."""
        frames = work.frames
        columns = [[(f.name, f.dataType) for f in df.schema.fields] for df in frames]
        paths = work.input_paths
        if paths and all(c == columns[0] for c in columns[1:]):
            files = tuple(Written(path, *work.store.stats(Path(path))) for path in paths)
            return Produced(files, None, shared=True)
        return work.write(reduce(lambda a, b: a.unionByName(b), frames))


@dataclass(frozen=True, kw_only=True)
class JoinStage(Stage):
    """The rows of one epoch of the left input joined with the same epoch of the right."""

    on: tuple[str, ...]
    how: str = "inner"

    kind: ClassVar[str] = "join"

    def summary(self) -> str:
        return f"Join on {', '.join(self.on)}"

    def compute(self, work: StageWork) -> Produced:
        left, right = work.frames
        return work.write(left.join(right, on=list(self.on), how=self.how))


@dataclass(frozen=True, kw_only=True)
class StatefulStage(Stage):
    """A keyed stage whose state carries from epoch to epoch, processed strictly in order."""

    key: tuple[str, ...]
    schema: StructType
    """The state's columns (``key`` among them): also the stage's output."""
    update: StateUpdate

    kind: ClassVar[str] = "stateful"
    holds_state: ClassVar[bool] = True

    @property
    def code(self) -> Callable[..., object]:
        return self.update

    def summary(self) -> str:
        return f"Stateful stage keyed by {', '.join(self.key)} (state carries to the next epoch)"

    def revision_epochs(
        self, state: KeyedState, pipeline: str, requested: Sequence[Time], done: Sequence[Time]
    ) -> list[Time]:
        """Every done epoch from the earliest requested one on, from the state before it."""
        if not requested:
            return []
        first = min(requested)
        assert isinstance(first, int)
        state.rewind(pipeline, self.name, self.key, first)
        return [e for e in sorted(done) if isinstance(e, int) and e >= first]

    def compute(self, work: StageWork) -> Produced:
        return carry(work, key=self.key, schema=self.schema, update=self.update)


@dataclass(frozen=True, kw_only=True)
class IterateStage(Stage):
    """Rounds of Spark jobs to a fixed point inside each epoch (see ``pipelines.iteration``)."""

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

    def resumable_paths(self, ledger: Ledger, pipeline: str) -> list[str]:
        return pending_paths(ledger, pipeline, self.name)

    def compute(self, work: StageWork) -> Produced:
        epoch = work.epoch
        assert isinstance(epoch, int)
        rounds = Rounds(
            work.ledger,
            work.store,
            work.spark,
            pipeline=work.pipeline,
            stage=self.name,
            init=self.init,
            step=self.step,
            max_rounds=self.max_rounds,
            epoch=epoch,
            checkpoint=not work.revision,
            on_round=work.on_round,
        )
        fixed = rounds.run(work.frames[0], work.attempt_dir())
        written = Written(str(fixed.path), *work.store.stats(fixed.path))
        return Produced((written,), fixed.path, rounds=fixed.rounds, in_commit=fixed.leave)


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

    def compute(self, work: StageWork) -> Produced:
        return work.write(work.frames[0])


@dataclass(frozen=True, kw_only=True)
class SinkStage(Stage):
    """Each committed epoch of its input, published to ``path`` (Parquet, an ``epoch=N`` link
    per epoch) after its commit; a relative ``path`` is under the runtime's home (see
    ``pipelines.sinks``)."""

    path: str

    kind: ClassVar[str] = "sink"
    outputs: ClassVar[int] = 0

    def summary(self) -> str:
        relative = not Path(self.path).expanduser().is_absolute()
        where = f"{self.path} under the runtime's home" if relative else self.path
        return f"Sink: publishes each committed epoch to {where} (epoch=N)"

    def directory(self, pipeline: str, home: Path) -> SinkDirectory:
        """Where it publishes, for a runtime whose home is ``home``."""
        return SinkDirectory(pipeline, self.name, resolve_sink_path(self.path, home))

    def compute(self, work: StageWork) -> Produced:
        """Writes the epoch's attempt like any stage; publishes it once it is committed."""
        produced = work.write(work.frames[0])
        sink = self.directory(work.pipeline, work.home)
        epoch, attempt, files = work.output_time, work.attempt, produced.written
        return dataclasses.replace(produced, committed=lambda: sink.publish(epoch, attempt, files))


def with_inputs(stage: Stage, inputs: tuple[str, ...]) -> Stage:
    """The same stage reading ``inputs`` (a feedback stage, once connected)."""
    return dataclasses.replace(stage, inputs=inputs)
