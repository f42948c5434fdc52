"""What each stage kind does when it runs, found by the kind's type.

A kind's spec (``pipelines.stages.kinds``) is plain data; its run lives here: how it computes an
epoch, what its readers read of it, what else its run reads, how a revision goes, what its
garbage collection keeps, and how it answers an upquery. ``run_of(stage)`` finds a kind's run by
walking its type's bases, so a kind without a run of its own behaves as the kind it refines.
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Sequence
from functools import reduce
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pipelines.errors import StageFailedError
from pipelines.run.carry import carry, replay_updates, settle
from pipelines.run.iteration import Rounds, pending_paths
from pipelines.run.published import Committed
from pipelines.run.sinks import sink_target
from pipelines.run.work import Produced, StageWork, Written
from pipelines.spark._internals import spark_type_of_arrow
from pipelines.stages.aggregate import AggregateStage
from pipelines.stages.kinds import (
    DimensionStage,
    FeedbackStage,
    IterateStage,
    JoinStage,
    KeyedStage,
    SinkStage,
    Stage,
    StatefulStage,
    TransformStage,
    UnionStage,
)
from progress import Source, Time, less_equal
from progress.ledger import Ledger, MessageRecord, MessageRef
from state_store import KeyedState

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import DataType

    from pipelines.stages.pipeline import Pipeline

S = TypeVar("S", bound=Stage)
K = TypeVar("K", bound=KeyedStage)


class KindRun(Generic[S]):
    """A kind's behaviour at run time; each method takes the stage's spec first."""

    def compute(self, stage: S, work: StageWork) -> Produced:
        """The stage's output message for ``work.epoch``."""
        raise NotImplementedError(f"stage {stage.name!r} ({stage.kind}) is not run")

    def instant(self, stage: S, work: StageWork) -> bool:
        """Whether ``compute`` is bookkeeping alone: no Spark job, nothing written but links
        (so it may run inside the ledger transaction that admits it)."""
        return False

    def read_at(self, stage: S, ledger: Ledger, pipeline: str, epoch: Time) -> list[MessageRecord]:
        """The messages of its output that a stage reading it at ``epoch`` reads: the current
        ones committed at ``epoch``."""
        return ledger.message(pipeline, stage.name, 0, epoch)

    def carried(self, stage: S, ledger: Ledger, pipeline: str, epoch: Time) -> list[MessageRef]:
        """The messages of its own that its run at ``epoch`` reads besides its inputs (none):
        recorded with what it read, so that replacing one makes the run stale."""
        return []

    def revision_epochs(
        self,
        stage: S,
        state: KeyedState,
        ledger: Ledger,
        pipeline: str,
        *,
        requested: Sequence[Time],
        done: Sequence[Time],
    ) -> list[Time]:
        """The epochs a revision of ``requested`` recomputes, in order (getting ready for it)."""
        return sorted(set(requested))

    def resumable_paths(self, stage: S, ledger: Ledger, pipeline: str) -> list[str]:
        """Data a new run of this stage may resume from (kept by garbage collection)."""
        return []

    def rederive(self, stage: S, spark: SparkSession, inputs: DataFrame) -> DataFrame:
        """Its output rows for the keys in ``inputs`` at every epoch, from its input rows for
        them (``inputs`` has an ``_epoch`` column; so has the result): what an upquery fills a
        hole with, and what a partial stage below this one reads for the same keys."""
        raise NotImplementedError(f"stage {stage.name!r} ({stage.kind}) answers no upquery")


class DimensionRun(KindRun[DimensionStage]):
    def read_at(
        self, stage: DimensionStage, ledger: Ledger, pipeline: str, epoch: Time
    ) -> list[MessageRecord]:
        """Its table as of ``epoch``: each worker's latest messages with data at or before it."""
        return ledger.messages_as_of(pipeline, stage.name, 0, epoch)


_NOTHING_WRITTEN = Produced((Written(None, 0, 0),), None)
"""The message of a stage that is not materialized: no data, no Spark job (the stages that
read it recompute it themselves)."""


class TransformRun(KindRun[TransformStage]):
    def compute(self, stage: TransformStage, work: StageWork) -> Produced:
        if not stage.materialize:
            return _NOTHING_WRITTEN
        return work.write(stage.fn(work.frames[0]))

    def instant(self, stage: TransformStage, work: StageWork) -> bool:
        return not stage.materialize


class JoinRun(KindRun[JoinStage]):
    def compute(self, stage: JoinStage, work: StageWork) -> Produced:
        if not stage.materialize:
            return _NOTHING_WRITTEN
        return work.write(stage.recompute(work.frames, work.epoch, work.columns))

    def instant(self, stage: JoinStage, work: StageWork) -> bool:
        return not stage.materialize


class UnionRun(KindRun[UnionStage]):
    def compute(self, stage: UnionStage, work: StageWork) -> Produced:
        """Inputs with the same columns and types are their committed files, as they are: the
        output catalogs them again (attempts are immutable), with no copy. Otherwise, or when
        no input has data, Spark writes the union."""
        frames = work.frames
        columns = [[(f.name, f.dataType) for f in df.schema.fields] for df in frames]
        paths = work.input_paths
        if paths and not (work.derives or work.drops) and all(c == columns[0] for c in columns[1:]):
            files = tuple(Written(path, *work.store.stats(Path(path))) for path in paths)
            return Produced(files, None, shared=True)
        return work.write(reduce(lambda a, b: a.unionByName(b), frames))


class KeyedRun(KindRun[K]):
    def revision_epochs(
        self,
        stage: K,
        state: KeyedState,
        ledger: Ledger,
        pipeline: str,
        *,
        requested: Sequence[Time],
        done: Sequence[Time],
    ) -> list[Time]:
        """Every done epoch from the earliest requested one on, from the state before it. The
        staged attempts the ledger committed (a run killed between its two commits) are settled
        first: settled after the rewind, one would put its epoch's rows back into the state the
        revision starts from, and they would count twice."""
        if not requested:
            return []
        first = min(requested)
        assert isinstance(first, int)
        settle(state, ledger, pipeline, stage.name, stage.key)
        state.rewind(pipeline, stage.name, stage.key, first)
        return [e for e in sorted(done) if isinstance(e, int) and e >= first]

    def carried(self, stage: K, ledger: Ledger, pipeline: str, epoch: Time) -> list[MessageRef]:
        """Its own output the epoch before: the state its run at ``epoch`` starts from is what
        its runs through that epoch left. A revision from an earlier epoch that was stopped
        before it reached this one (a kill) replaced that output, so this run is stale and is
        revised in turn."""
        if not isinstance(epoch, int) or epoch == 0:
            return []
        before = stage.output_time(epoch - 1)
        return [
            MessageRef(stage.name, m.port, m.time, m.attempt)
            for m in ledger.message(pipeline, stage.name, 0, before)
        ]


class StatefulRun(KeyedRun[StatefulStage]):
    def compute(self, stage: StatefulStage, work: StageWork) -> Produced:
        return carry(
            work, key=stage.key, schema=stage.schema, update=stage.update, partial=stage.partial
        )

    def rederive(self, stage: StatefulStage, spark: SparkSession, inputs: DataFrame) -> DataFrame:
        """Its update applied epoch by epoch to the keys' rows (one small job per epoch)."""
        return replay_updates(
            spark, inputs, key=stage.key, schema=stage.schema, update=stage.update
        )


class AggregateRun(KeyedRun[AggregateStage]):
    def compute(self, stage: AggregateStage, work: StageWork) -> Produced:
        from pyspark.sql import types as T

        schema = stage.partials_schema(work.frames[0])
        held = _held_key_types(stage, work)
        if held:  # the key types its state already has: the carry refuses others
            schema = T.StructType(
                [
                    T.StructField(f.name, held.get(f.name, f.dataType), f.nullable)
                    for f in schema.fields
                ]
            )
        return carry(
            work,
            key=stage.key,
            schema=schema,
            update=stage.merge(schema),
            partial=stage.partial,
            shaped=True,
        )

    def rederive(self, stage: AggregateStage, spark: SparkSession, inputs: DataFrame) -> DataFrame:
        """One pass over the keys' history (``AggregateStage.running``)."""
        return stage.running(inputs)


def _held_key_types(stage: AggregateStage, work: StageWork) -> dict[str, DataType]:
    """The key columns' types in its output the epoch before (its state's), read from a
    Parquet footer; none before its first run."""
    import pyarrow.parquet as pq

    assert isinstance(work.epoch, int)
    if work.epoch == 0:
        return {}
    before = work.ledger.message(work.pipeline, stage.name, 0, work.epoch - 1)
    files = sorted(Path(before[0].path).glob("*.parquet")) if before and before[0].path else []
    if not files:
        return {}
    schema = pq.read_schema(files[0])
    return {k: spark_type_of_arrow(schema.field(k).type) for k in stage.key if k in schema.names}


class IterateRun(KindRun[IterateStage]):
    def compute(self, stage: IterateStage, work: StageWork) -> Produced:
        epoch = work.epoch
        assert isinstance(epoch, int)
        rounds = Rounds(
            work.ledger,
            work.store,
            work.spark,
            pipeline=work.pipeline,
            stage=stage.name,
            init=stage.init,
            step=stage.step,
            max_rounds=stage.max_rounds,
            epoch=epoch,
            checkpoint=not work.revision,
            on_round=work.on_round,
        )
        fixed = rounds.run(work.frames[0], work.attempt_dir())
        written = Written(str(fixed.path), *work.store.stats(fixed.path))
        return Produced((written,), fixed.path, rounds=fixed.rounds, in_commit=fixed.leave)

    def resumable_paths(self, stage: IterateStage, ledger: Ledger, pipeline: str) -> list[str]:
        return pending_paths(ledger, pipeline, stage.name)


class FeedbackRun(KindRun[FeedbackStage]):
    def compute(self, stage: FeedbackStage, work: StageWork) -> Produced:
        """Its input, carried ``delay`` epochs on. A loop whose feedback announced every epoch,
        empty or not, would never end: one that carries nothing round announces no message
        (its message, with no data, is catalogued uncounted), and the loop's next epoch waits
        only for what comes from outside it. The message keeps what the run read, so a revision
        of that input finds the run stale, and the revised message (rows now, perhaps) makes
        the loop's runs that read the empty one stale in turn; a run of the loop still to come
        reads the revised one. Where the loop passed that epoch without running (nothing came
        round, nothing came from outside), rows carried round by a revision would reach no
        run: refused, not yet supported."""
        produced = work.write(work.frames[0])
        rows = sum(f.rows for f in produced.files)
        if work.revision:
            if rows and not _read_round(stage, work):
                if produced.written is not None:
                    shutil.rmtree(produced.written, ignore_errors=True)
                at = stage.output_time(work.epoch)
                raise StageFailedError(
                    stage.name,
                    work.epoch,
                    f"this revision carries {rows} row(s) round into epoch {at}, which the loop "
                    "passed without running (nothing came round to it before, and nothing from "
                    "outside): not supported yet (a loop cannot take new work at an epoch it "
                    "has passed)",
                )
            return produced
        if rows:
            return produced
        if produced.written is not None:
            shutil.rmtree(produced.written, ignore_errors=True)
        return Produced((Written(None, 0, 0),), None, announces=False)


def _read_round(stage: FeedbackStage, work: StageWork) -> bool:
    """Whether the loop reads what ``stage`` carries round from ``work.epoch``: its message
    there announced data (the loop's run of that epoch reads it when it runs), a run of the
    loop read its empty one, or the loop has not passed that epoch yet (its run there, if one
    comes, reads the revised message)."""
    p, at = work.pipeline, stage.output_time(work.epoch)
    for m in work.ledger.message(p, stage.name, 0, at):
        if m.path is not None or work.ledger.read_by(p, MessageRef(stage.name, 0, at, m.attempt)):
            return True
    tracker = work.ledger.tracker(p)  # a reader whose input, at any port, may still get `at`
    graph = tracker.graph
    readers = {target.node for target in graph.edges.get(Source(stage.name, 0), ())}
    ports = [port for name in readers for port in graph.node(name).targets()]
    return any(less_equal(t, at) for port in ports for t in tracker.frontier(port).elements)


class SinkRun(KindRun[SinkStage]):
    def compute(self, stage: SinkStage, work: StageWork) -> Produced:
        """Its attempt holds its input's committed files (hard links, no Spark job) when they
        can be taken as they are (``StageWork.linkable``), else Spark writes it like any
        stage's; it is published once it is committed."""
        linked = work.linkable
        produced = work.write(work.frames[0]) if linked is None else work.link(linked)
        sink = sink_target(stage, work.pipeline, work.home)
        epoch, attempt, files = work.output_time, work.attempt, produced.written
        sink.check(Committed(epoch, attempt, 0, files))  # before the commit: it fits

        def publish(batch: int) -> None:
            sink.publish(Committed(epoch, attempt, batch, files))

        return dataclasses.replace(produced, committed=publish)

    def instant(self, stage: SinkStage, work: StageWork) -> bool:
        return work.linkable is not None


RUNS: dict[type[Stage], KindRun[Any]] = {
    Stage: KindRun(),
    DimensionStage: DimensionRun(),
    TransformStage: TransformRun(),
    JoinStage: JoinRun(),
    UnionStage: UnionRun(),
    KeyedStage: KeyedRun[KeyedStage](),
    StatefulStage: StatefulRun(),
    AggregateStage: AggregateRun(),
    IterateStage: IterateRun(),
    FeedbackStage: FeedbackRun(),
    SinkStage: SinkRun(),
}


def run_of(stage: Stage) -> KindRun[Any]:
    """The run of ``stage``'s kind: its own, or that of the nearest kind it refines."""
    for kind in type(stage).__mro__:
        found = RUNS.get(kind)
        if found is not None:
            return found
    raise TypeError(f"{type(stage).__name__} is not a stage kind")


def messages_read(
    pipeline: Pipeline, ledger: Ledger, stage: str, epoch: Time
) -> list[MessageRecord]:
    """The messages of ``stage``'s output that a stage reading it at ``epoch`` reads."""
    spec = pipeline.stage(stage)
    return run_of(spec).read_at(spec, ledger, pipeline.name, epoch)
