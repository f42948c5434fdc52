"""The per-epoch run: read a stage's input through the ledger, run it, commit its output.

``Runtime.run_stage(stage, epoch)`` refuses an epoch that is not ready (naming who holds it),
reads exactly the messages committed at the stage's inputs for that epoch, runs the stage's
function on Spark, writes a fresh attempt directory, and commits the output message with the
progress batch (inputs consumed, output announced) in one ledger transaction. A run that fails
or is killed commits nothing; running a done ``(stage, epoch)`` again does nothing.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from functools import reduce
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipelines.dataflow import Pipeline, Stage
from pipelines.errors import PipelineError, StageFailedError, StageNotReadyError
from pipelines.inputs import SourceInput, first_line
from pipelines.iteration import FixedPoint, RoundCallback, Rounds, pending_paths, scope_graph
from pipelines.storage import DataStore, new_attempt
from progress import Graph, Target, Time, Tracker, Update, less_equal
from progress.ledger import Ledger, MessageEntry, MessageRef, Origin, scope_name
from state_store import KeyedState

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType


@dataclass(frozen=True)
class RunResult:
    """What one ``run_stage`` did."""

    stage: str
    epoch: Time
    status: str  # "succeeded", "revised", "done-already"
    attempt: str | None = None
    rows: int = 0
    seconds: float = 0.0
    rounds: int = 0
    """For an iterative stage: the rounds this run computed."""

    def describe(self) -> str:
        if self.status not in ("succeeded", "revised"):
            return f"{self.stage} epoch {self.epoch}: {self.status}"
        what = "revised, " if self.status == "revised" else ""
        rounds = f" ({self.rounds} rounds)" if self.rounds else ""
        return (
            f"{self.stage} epoch {self.epoch}: {what}{self.rows} rows in {self.seconds:.2f}s"
            f"{rounds}"
        )


def run_key(stage: str, epoch: Time) -> str:
    return f"run:{stage}:{epoch}"


Resolved = tuple[list[MessageRef], list[str]]
"""An input's current messages at an epoch: their references and their data paths."""


@dataclass(frozen=True)
class _Admitted:
    """A run that may start: its progress batch, attempt, run record and resolved input."""

    stage: Stage
    epoch: Time
    batch: list[Update]
    revision: bool
    attempt: str
    run_id: str
    inputs: list[Resolved]
    empty: list[StructType | None]
    """Per input: its schema when it has no data at this epoch."""
    started: float


@dataclass(frozen=True)
class _Worked:
    """A run whose Spark work is done: the catalog entries of its message, to commit."""

    run: _Admitted
    entries: list[MessageEntry]
    written: Path | None
    """The attempt directory this run wrote (none when its output refers to its input's)."""
    fixed: FixedPoint | None


def register(ledger: Ledger, pipeline: Pipeline, *, from_start: bool = False) -> Graph:
    """Register ``pipeline``'s graph (and its iterative stages' scopes) in ``ledger``, as
    anything that runs it or feeds it must first; returns the graph."""
    graph = pipeline.graph()
    ledger.register(pipeline.name, graph, from_start=from_start)
    for stage in pipeline.stages.values():
        if stage.kind == "iterate":
            ledger.register(scope_name(pipeline.name, stage.name), scope_graph())
    return graph


class Runtime:
    """A pipeline bound to a ledger, a Spark session and a data directory."""

    def __init__(
        self,
        pipeline: Pipeline,
        ledger: Ledger,
        spark: SparkSession,
        data_root: Path,
        *,
        from_start: bool = False,
        state: KeyedState | None = None,
        on_round: RoundCallback | None = None,
    ) -> None:
        self.pipeline = pipeline
        self.on_round = on_round
        self.ledger = ledger
        self.state = state or KeyedState(ledger.path.with_name("state.duckdb"))
        self.spark = spark
        self.store = DataStore(data_root)
        self.graph = register(ledger, pipeline, from_start=from_start)
        self._order = self.graph.depths()

    def input(self, source: str, worker: int = 0) -> SourceInput:
        """The handle of one worker of a source."""
        return SourceInput(self, source, worker)

    def collect_garbage(self, older_than: float = 3600.0) -> list[Path]:
        """Remove data of attempts that were never committed (killed or lost runs)."""
        live = self.ledger.live_paths(self.pipeline.name)
        running = {p for p in live if p.startswith("attempt=")}
        keep = [p for p in live if not p.startswith("attempt=")]
        for stage in self.pipeline.stages.values():
            if stage.kind == "iterate":
                keep += pending_paths(self.ledger, self.pipeline.name, stage.name)
        keep += [
            str(d)
            for d in (self.store.root / self.pipeline.name).glob("*/port=*/epoch=*/**/attempt=*")
            if d.name in running
        ]
        return self.store.collect_garbage(self.pipeline.name, keep, older_than=older_than)

    # -- what can run --------------------------------------------------------------------------

    def pending(self, tracker: Tracker | None = None) -> list[tuple[str, Time]]:
        """Every ``(stage, epoch)`` with messages waiting, in epoch order, upstream first."""
        tracker = tracker or self.ledger.tracker(self.pipeline.name)
        waiting = {(loc.node, t) for loc, t, _ in tracker.pointstamps() if isinstance(loc, Target)}
        return sorted(waiting, key=lambda item: (item[1], self._order[item[0]]))

    def ready(self) -> list[tuple[str, Time]]:
        tracker = self.ledger.tracker(self.pipeline.name)
        return [(s, t) for s, t in self.pending(tracker) if tracker.ready(s, t)]

    def run(self, on_result: Callable[[RunResult], None] | None = None) -> list[RunResult]:
        """Run every ready ``(stage, epoch)`` in epoch order, then re-run stale outputs (those
        that read an attempt a revision has replaced), until nothing is left.

        One ledger session per stage run: it commits the previous run, picks the next and
        resolves its input; Spark works with the ledger unlocked."""
        results: list[RunResult] = []
        revised: set[tuple[str, Time]] = set()
        worked: _Worked | None = None

        def report(result: RunResult) -> None:
            results.append(result)
            if on_result is not None:
                on_result(result)

        while True:
            admitted: _Admitted | RunResult | None = None
            stale: list[tuple[str, Time]] = []
            with self.ledger.session():
                finished = self._finish(worked) if worked is not None else None
                worked = None
                ready = self.ready()
                if ready:
                    admitted = self._admit(*ready[0])
                else:
                    stale = self.stale()
            if finished is not None:
                report(finished)
            if isinstance(admitted, RunResult):
                report(admitted)
            elif admitted is not None and admitted.stage.kind == "stateful":
                with self.exclusive(admitted.stage.name):  # never while holding the ledger
                    report(self._complete(admitted))
            elif admitted is not None:
                worked = self._work(admitted)
            elif not stale:
                return results
            else:
                for result in self._revise_stale(stale, revised):
                    report(result)

    def _revise_stale(
        self, stale: list[tuple[str, Time]], revised: set[tuple[str, Time]]
    ) -> list[RunResult]:
        """Re-run the earliest stale output (and, for a stateful stage, the epochs after it).
        ``revised`` remembers what this loop revised: stale again means a cycle of revisions."""
        stage, epoch = stale[0]
        if (stage, epoch) in revised:
            raise PipelineError(
                f"stage {stage!r} epoch {epoch} is still stale after it was revised: "
                "its output reads an attempt that is not current"
            )
        batch = self.revise(stage, [epoch])
        revised.update((r.stage, r.epoch) for r in batch)
        return batch

    def backfill(
        self,
        stage_name: str,
        epochs: Sequence[Time],
        on_result: Callable[[RunResult], None] | None = None,
        *,
        downstream: bool = True,
    ) -> list[RunResult]:
        """Backfill ``stage_name`` over ``epochs`` with the current code and inputs: epochs it
        has run are revised, epochs it has not run yet are run, then (unless ``downstream`` is
        False: someone else re-runs them) every output the backfill made stale is re-run in
        epoch order. Frontiers never move back and nothing counts twice.

        When an epoch it has not run is not ready either, nothing runs: the error names that
        epoch's blockers."""
        p = self.pipeline.name
        self._runnable(stage_name)
        with self.ledger.session():
            done = set(self.ledger.done_epochs(p, stage_name))
            tracker = self.ledger.tracker(p)
            for epoch in sorted(set(epochs) - done):
                if not tracker.ready(stage_name, epoch):
                    holds = self.ledger.blockers(p, stage_name, epoch)
                    raise StageNotReadyError(stage_name, epoch, [h.text for h in holds])
                if not tracker.stage_batch(stage_name, epoch):
                    why = ["no input message arrives at this epoch"]
                    raise StageNotReadyError(stage_name, epoch, why)
        results: list[RunResult] = []

        def report(batch: list[RunResult]) -> None:
            results.extend(batch)
            if on_result is not None:
                for result in batch:
                    on_result(result)

        redo = sorted(e for e in set(epochs) if e in done)
        with self.exclusive(stage_name):
            if redo:
                report(self.revise(stage_name, redo))
            for epoch in sorted(set(epochs) - done):
                report([self.run_stage(stage_name, epoch)])
        revised = {(r.stage, r.epoch) for r in results}
        while downstream and (stale := self.stale()):
            report(self._revise_stale(stale, revised))
        return results

    def exclusive(self, stage_name: str) -> AbstractContextManager[None]:
        """Hold the right to run ``stage_name`` when it is stateful (its epochs read the state
        the one before left, so one run of it at a time, in any process); else nothing.
        Runs of this Runtime take it themselves; hold it to keep it across several runs.
        Never take it inside a ledger session: a holder may wait for the ledger."""
        stage = self.pipeline.stage(stage_name)
        if stage.kind != "stateful":
            return nullcontext()
        return self.state.writer(self.pipeline.name, stage_name)

    def stale(self) -> list[tuple[str, Time]]:
        """Done ``(stage, epoch)`` runs whose input was revised since, earliest first."""
        found = self.ledger.stale(self.pipeline.name)
        return sorted(found, key=lambda item: (item[1], self._order[item[0]]))

    # -- one run -------------------------------------------------------------------------------

    def run_stage(self, stage_name: str, epoch: Time) -> RunResult:
        """Run ``stage_name`` for ``epoch`` once (see the module docs)."""
        with self.exclusive(stage_name):
            with self.ledger.session():  # one connection for every question before the work
                admitted = self._admit(stage_name, epoch)
            if isinstance(admitted, RunResult):
                return admitted
            return self._complete(admitted)

    def revise(self, stage_name: str, epochs: Sequence[Time]) -> list[RunResult]:
        """Recompute done epochs of a stage with the current code and inputs (a backfill).

        Each new attempt replaces the old one; frontiers do not move; downstream outputs that
        read the old attempt become stale and ``run()`` recomputes them. A stateful stage is
        recomputed from the earliest revised epoch onward, from the state as it was before it.
        """
        p = self.pipeline.name
        stage = self._runnable(stage_name)
        done = self.ledger.done_epochs(p, stage_name)
        missing = [e for e in epochs if e not in done]
        if missing:
            raise PipelineError(
                f"stage {stage_name!r} has not run epoch(s) {missing}: nothing to revise "
                "(run them instead)"
            )
        targets = sorted(set(epochs))
        results = []
        with self.exclusive(stage_name):
            if stage.kind == "stateful" and targets:
                first = targets[0]
                assert isinstance(first, int)
                targets = [e for e in sorted(done) if less_equal(first, e)]
                self.state.rewind(p, stage_name, stage.key, first)
            for epoch in targets:
                with self.ledger.session():
                    admitted = self._prepare(stage, epoch, batch=[], revision=True)
                results.append(self._complete(admitted))
        return results

    def _runnable(self, stage_name: str) -> Stage:
        stage = self.pipeline.stage(stage_name)
        if stage.is_source:
            raise PipelineError(f"{stage_name!r} is a source: it is fed by send(), not run")
        return stage

    def _admit(self, stage_name: str, epoch: Time) -> _Admitted | RunResult:
        """In a session: check that the run is due and ready, and prepare it."""
        p = self.pipeline.name
        stage = self._runnable(stage_name)
        if self.ledger.committed(p, run_key(stage_name, epoch)) is not None:
            return RunResult(stage_name, epoch, "done-already")
        tracker = self.ledger.tracker(p)
        if not tracker.ready(stage_name, epoch):
            holds = self.ledger.blockers(p, stage_name, epoch)
            raise StageNotReadyError(stage_name, epoch, [h.text for h in holds])
        batch = tracker.stage_batch(stage_name, epoch)
        if not batch:
            why = ["no input message arrives at this epoch"]
            raise StageNotReadyError(stage_name, epoch, why)
        return self._prepare(stage, epoch, batch=batch, revision=False)

    def _prepare(
        self, stage: Stage, epoch: Time, *, batch: list[Update], revision: bool
    ) -> _Admitted:
        """In a session: record the run's start and resolve its input messages."""
        p = self.pipeline.name
        started = time.perf_counter()
        attempt = new_attempt()
        run_id = self.ledger.start_run(p, stage.name, epoch, attempt)
        inputs = [self._input(upstream, epoch) for upstream in stage.inputs]
        empty = [
            None if paths else self._schema_of(u)
            for u, (_, paths) in zip(stage.inputs, inputs, strict=True)
        ]
        return _Admitted(stage, epoch, batch, revision, attempt, run_id, inputs, empty, started)

    def _complete(self, admitted: _Admitted) -> RunResult:
        worked = self._work(admitted)
        with self.ledger.session():  # the commit and the run record in one connection
            return self._finish(worked)

    def _work(self, run: _Admitted) -> _Worked:
        """The Spark work of a run, holding no ledger lock: compute and write a fresh attempt.
        A failure is recorded on the run and raised; nothing is committed."""
        p = self.pipeline.name
        stage, epoch, attempt = run.stage, run.epoch, run.attempt
        scratch = self.store.attempt_dir(p, stage.name, 0, epoch, f"{attempt}.scratch")
        fixed: FixedPoint | None = None
        out_time = stage.output_time(epoch)
        try:
            try:
                shared = self._shared_files(run) if stage.kind == "union" else None
                if shared is not None:
                    reads, paths = shared
                    entries = [
                        MessageEntry(
                            stage.name,
                            0,
                            out_time,
                            f"{attempt}.{i}",
                            path,
                            *self.store.stats(Path(path)),
                            replaces=run.revision and i == 0,
                            run_time=epoch,
                            reads=reads if i == 0 else (),
                        )
                        for i, path in enumerate(paths)
                    ]
                    return _Worked(run, entries, None, None)
                if stage.kind == "iterate":
                    assert isinstance(epoch, int)
                    frames, reads = self._frames(stage, run.inputs, run.empty)
                    rounds = Rounds(
                        self.ledger,
                        self.store,
                        self.spark,
                        pipeline=p,
                        stage=stage,
                        epoch=epoch,
                        checkpoint=not run.revision,
                        on_round=self.on_round,
                    )
                    fixed = rounds.run(
                        frames[0], self.store.attempt_dir(p, stage.name, 0, epoch, attempt)
                    )
                    path = fixed.path
                    rows, size = self.store.stats(path)
                else:
                    output, reads = self._compute(stage, run.inputs, run.empty, scratch)
                    path, rows, size = self._write(stage, epoch, attempt, output)
                if stage.kind == "stateful":
                    assert isinstance(epoch, int)
                    self.state.stage(p, stage.name, epoch, attempt, f"{path}/*.parquet")
            except Exception as err:
                self.ledger.finish_run(run.run_id, "failed", error=first_line(err))
                if isinstance(err, PipelineError):
                    raise
                raise StageFailedError(stage.name, epoch, first_line(err)) from err
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        message = MessageEntry(
            stage.name, 0, out_time, attempt, str(path), rows, size, run.revision, epoch, reads
        )
        return _Worked(run, [message], path, fixed)

    def _shared_files(self, run: _Admitted) -> tuple[tuple[MessageRef, ...], list[str]] | None:
        """A union of inputs with the same columns and types is their committed files, as
        they are: its message catalogs them again (attempts are immutable), with no copy.
        ``None`` when the inputs differ, or none has data: then Spark writes the union."""
        frames, reads = self._frames(run.stage, run.inputs, run.empty)
        columns = [[(f.name, f.dataType) for f in df.schema.fields] for df in frames]
        if any(c != columns[0] for c in columns[1:]):
            return None
        paths = [path for _, found in run.inputs for path in found]
        return (reads, paths) if paths else None

    def _finish(self, worked: _Worked) -> RunResult:
        """In a session: commit the run's output and progress (and, for an iterative stage,
        the end of its last round) in one transaction."""
        p = self.pipeline.name
        run, entries, fixed = worked.run, worked.entries, worked.fixed
        stage, epoch, attempt = run.stage, run.epoch, run.attempt
        if run.revision:
            key = f"revise:{stage.name}:{epoch}:{attempt}"
        else:
            key = run_key(stage.name, epoch)
        with self.ledger.atomic():  # an iterative stage's last round ends with its epoch
            if fixed is not None:
                fixed.leave(self.ledger)
            result = self.ledger.commit(
                p, run.batch, key=key, messages=entries, origin=Origin.stage(stage.name, epoch)
            )
        if result.repeated:  # another process committed this run first: ours is not seen
            if worked.written is not None:
                shutil.rmtree(worked.written, ignore_errors=True)
            if stage.kind == "stateful":
                self.state.abandon(p, stage.name, attempt)
            self.ledger.finish_run(run.run_id, "skipped", batch_id=result.batch_id)
            return RunResult(stage.name, epoch, "done-already")
        if stage.kind == "stateful":
            self.state.commit(p, stage.name, stage.key, attempt)
        self.ledger.finish_run(run.run_id, "succeeded", batch_id=result.batch_id)
        status = "revised" if run.revision else "succeeded"
        seconds = time.perf_counter() - run.started
        rounds = fixed.rounds if fixed is not None else 0
        rows = sum(e.rows for e in entries)
        return RunResult(stage.name, epoch, status, attempt, rows, seconds, rounds)

    def read(self, stage: str, epoch: Time) -> DataFrame:
        """The committed output of ``stage`` at ``epoch`` (all current messages)."""
        messages = self.ledger.message(self.pipeline.name, stage, 0, epoch)
        paths = [m.path for m in messages if m.path]
        if paths:
            return self.spark.read.parquet(*paths)
        return self.spark.createDataFrame([], self._schema_of(stage))

    def _input(self, upstream: str, epoch: Time) -> Resolved:
        """The current messages of ``upstream`` at ``epoch``: references and data paths."""
        messages = self.ledger.message(self.pipeline.name, upstream, 0, epoch)
        refs = [MessageRef(upstream, 0, epoch, m.attempt) for m in messages]
        return refs, [m.path for m in messages if m.path]

    def _schema_of(self, stage: str) -> StructType:
        spec = self.pipeline.stage(stage)
        if spec.schema is not None:
            return spec.schema
        latest = self.ledger.latest_message(self.pipeline.name, stage, 0)
        if latest is None or latest.path is None:
            raise StageFailedError(stage, "-", "its output has no data yet to take a schema from")
        return self.spark.read.parquet(latest.path).schema

    def _compute(
        self,
        stage: Stage,
        resolved: list[Resolved],
        empty: list[StructType | None],
        scratch: Path,
    ) -> tuple[DataFrame, tuple[MessageRef, ...]]:
        """The stage's output from its resolved input messages, and the messages it read."""
        inputs, reads = self._frames(stage, resolved, empty)
        if stage.kind == "stateful":
            out = self._carry(stage, inputs[0], resolved[0][1], scratch)
        else:
            out = _KINDS[stage.kind](stage, inputs)
        from pyspark.sql import DataFrame as AnyFrame  # classic and Spark Connect frames

        if not isinstance(out, AnyFrame):
            raise TypeError(f"the stage function returned {type(out).__name__}, not a DataFrame")
        return out, reads

    def _frames(
        self, stage: Stage, resolved: list[Resolved], empty: list[StructType | None]
    ) -> tuple[list[DataFrame], tuple[MessageRef, ...]]:
        """One DataFrame per input from its resolved messages, and the messages read. A
        source's messages were checked against its schema on send: read with it, Spark skips
        reading the files' footers for one."""
        inputs: list[DataFrame] = []
        reads: list[MessageRef] = []
        for upstream, (refs, paths), schema in zip(stage.inputs, resolved, empty, strict=True):
            reads.extend(refs)
            declared = self.pipeline.stage(upstream).schema
            if paths and declared is not None:
                inputs.append(self.spark.read.schema(declared).parquet(*paths))
            elif paths:
                inputs.append(self.spark.read.parquet(*paths))
            else:
                assert schema is not None
                inputs.append(self.spark.createDataFrame([], schema))
        return inputs, tuple(reads)

    def _carry(
        self, stage: Stage, batch: DataFrame, batch_paths: list[str], scratch: Path
    ) -> DataFrame:
        """A stateful stage's epoch: the state of the keys in ``batch``, updated by its function.

        The state store reads the keys straight from the batch's files (no Spark job). Staged
        attempts left by a crash are settled first, against what the ledger committed.
        """
        p = self.pipeline.name
        assert stage.schema is not None
        assert stage.fn is not None

        def committed(epoch: int, attempt: str) -> bool:
            return any(m.attempt == attempt for m in self.ledger.message(p, stage.name, 0, epoch))

        self.state.reconcile(p, stage.name, stage.key, committed)
        missing = [k for k in stage.key if k not in batch.columns]
        if missing:
            raise StageFailedError(
                stage.name, "-", f"its input has no key column(s) {missing} to look state up by"
            )
        scratch.mkdir(parents=True, exist_ok=True)
        state_file = scratch / "state.parquet"
        keys = [f"{path}/*.parquet" for path in batch_paths]
        if keys and self.state.export_latest(p, stage.name, stage.key, keys, str(state_file)):
            state = self.spark.read.schema(stage.schema).parquet(str(state_file))
        else:
            state = self.spark.createDataFrame([], stage.schema)
        out = stage.fn(batch, state)
        have = {f.name: f.dataType for f in out.schema.fields}
        for field in stage.schema.fields:
            if have.get(field.name) != field.dataType:
                found = have[field.name].simpleString() if field.name in have else "missing"
                raise StageFailedError(
                    stage.name,
                    "-",
                    f"state column {field.name!r} is {found}, the schema says "
                    f"{field.dataType.simpleString()}",
                )
        ordered: DataFrame = out.select(*stage.schema.fieldNames())
        return ordered

    def _write(
        self, stage: Stage, epoch: Time, attempt: str, df: DataFrame
    ) -> tuple[Path, int, int]:
        p = self.pipeline.name
        out_time = stage.output_time(epoch)
        path = self.store.attempt_dir(p, stage.name, 0, out_time, attempt)
        try:
            df.write.parquet(str(path))
            rows, size = self.store.stats(path)
            if stage.kind == "sink":
                publish(path, Path(stage.options["path"]) / f"epoch={epoch}", attempt)
        except BaseException:
            shutil.rmtree(path, ignore_errors=True)
            raise
        return path, rows, size


def publish(attempt_dir: Path, target: Path, attempt: str) -> None:
    """Copy a committed attempt to a user's path, replacing what was there in one rename."""
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.with_name(f".{target.name}.{attempt}")
    shutil.copytree(attempt_dir, staging)
    if target.exists():
        retired = target.with_name(f".{target.name}.retired.{attempt}")
        os.rename(target, retired)
        os.rename(staging, target)
        shutil.rmtree(retired, ignore_errors=True)
    else:
        os.rename(staging, target)


def _transform(stage: Stage, inputs: list[DataFrame]) -> Any:
    assert stage.fn is not None
    return stage.fn(inputs[0])


def _union(stage: Stage, inputs: list[DataFrame]) -> DataFrame:
    return reduce(lambda a, b: a.unionByName(b), inputs)


def _join(stage: Stage, inputs: list[DataFrame]) -> DataFrame:
    left, right = inputs
    joined: DataFrame = left.join(right, on=list(stage.options["on"]), how=stage.options["how"])
    return joined


def _identity(stage: Stage, inputs: list[DataFrame]) -> DataFrame:
    return inputs[0]


_KINDS: dict[str, Callable[[Stage, list[DataFrame]], Any]] = {
    "transform": _transform,
    "union": _union,
    "join": _join,
    "feedback": _identity,
    "sink": _identity,
}
