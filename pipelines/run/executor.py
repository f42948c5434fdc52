"""The executor of one stage run: admit it, do its Spark work, finish it.

* ``admit`` (in a ledger session, given the session's tracker): refuse an epoch that is not
  ready, naming who holds it; record the run's start; resolve the exact messages it will read.
* ``work`` (holding no ledger lock): the stage kind's ``compute`` writes a fresh attempt.
  A failure is recorded on the run and raised; nothing is committed. A write the disk refused
  (full, read-only) raises ``StageWriteError`` naming the attempt directory, whatever library
  met it (Spark, Arrow, DuckDB).
* ``finish`` (in a ledger session): one transaction commits the output messages with the
  progress batch (inputs consumed, output announced) and finishes the run record. A run whose
  epoch another run committed first leaves nothing visible. A ledger that cannot take the
  commit (``LedgerStorageError``: its disk full, its file read-only or gone, its lock lost)
  raises that error naming the stage and epoch too; nothing of the run is committed.
"""

from __future__ import annotations

import dataclasses
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pipelines.errors import (
    ExpectationFailedError,
    PipelineError,
    StageFailedError,
    StageNotReadyError,
    StageWriteError,
    first_line,
)
from pipelines.results import RunResult, RunStatus
from pipelines.run import expectations
from pipelines.run.ephemeral import derivation
from pipelines.run.expectations import ExpectationFailed
from pipelines.run.iteration import RoundCallback
from pipelines.run.kinds import messages_read, run_of
from pipelines.run.layout import sort_key
from pipelines.run.storage import DataStore, new_attempt
from pipelines.run.work import Produced, Resolved, StageWork
from pipelines.spark.empty import empty_frame
from pipelines.spark.footers import spark_schema
from pipelines.spark.session import LazySpark, SparkFactory
from pipelines.stages.families import followers
from pipelines.stages.kinds import Stage
from progress import Time, Tracker, Update, disk, faults
from progress.errors import LedgerStorageError
from progress.faults import FaultPoint
from progress.ledger import CheckEntry, Ledger, MessageEntry, MessageRef, Origin, RunKind
from progress.ledger.runs import RunStart, new_run_id
from state_store import KeyedState

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

    from pipelines.stages.pipeline import Pipeline


def run_key(stage: str, epoch: Time) -> str:
    """The ledger key of the run of ``stage`` at ``epoch``: committed once, ever."""
    return f"run:{stage}:{epoch}"


def raise_during(err: LedgerStorageError, pipeline: str, stage: str, epoch: Time) -> None:
    """Raise ``err`` naming the run it stopped, unless it names one already (then return)."""
    found = err.during(pipeline, stage, epoch)
    if found is not err:
        raise found from err


@dataclass(frozen=True)
class Admitted:
    """A run that may start: its stage, progress batch, attempt, run record and input."""

    stage: Stage
    epoch: Time
    batch: list[Update]
    revision: bool
    run_id: str
    work: StageWork
    started: float
    start_recorded: bool = True
    """Whether its start is recorded: not for an instant run (``Executor.instant``), recorded
    once with how it ended."""


@dataclass(frozen=True)
class Worked:
    """A run whose Spark work is done: what it produced, to commit."""

    run: Admitted
    produced: Produced
    checked: tuple[CheckEntry, ...] = ()
    """The results of the stage's expectations, recorded with the commit."""


@dataclass(frozen=True)
class Recorded:
    """A run whose commit is written (durable once its transaction commits)."""

    worked: Worked
    batch_id: int
    repeated: bool
    """Another process committed the run first: this one's output is not seen."""


class Executor:
    """Runs single ``(stage, epoch)`` runs of one pipeline against its ledger and data.

    ``spark`` may be a session not started yet (``LazySpark``, or a factory): a run starts it
    in its work, outside any ledger session, so no lock is held while a JVM starts."""

    def __init__(
        self,
        pipeline: Pipeline,
        ledger: Ledger,
        spark: SparkSession | SparkFactory | LazySpark,
        store: DataStore,
        state: KeyedState,
        *,
        on_round: RoundCallback | None = None,
    ) -> None:
        self.pipeline = pipeline
        self.ledger = ledger
        self.lazy_spark = LazySpark.of(spark)
        self.store = store
        self.state = state
        self.on_round = on_round

    @property
    def spark(self) -> SparkSession:
        """The Spark session, started now if nothing has needed it yet."""
        return self.lazy_spark.session()

    def runnable(self, stage_name: str) -> Stage:
        stage = self.pipeline.stage(stage_name)
        if stage.is_source:
            raise PipelineError(f"{stage_name!r} is a source: it is fed by send(), not run")
        return stage

    # -- admit ---------------------------------------------------------------------------------

    def admit(
        self, stage_name: str, epoch: Time, *, tracker: Tracker | None = None
    ) -> Admitted | RunResult:
        """In a session: check that the run is due and ready, and prepare it. ``tracker`` holds
        the session's counts when the caller has found the run pending in them already: then
        no commit of it is looked for (a committed run consumed its messages, so it is not
        pending; and ``finish`` commits a run key once, ever, whatever admitted it)."""
        p = self.pipeline.name
        stage = self.runnable(stage_name)
        if tracker is None:
            if self.ledger.committed(p, run_key(stage_name, epoch)) is not None:
                return RunResult(stage_name, epoch, RunStatus.DONE_ALREADY)
            tracker = self.ledger.tracker(p)
        else:
            self.ledger.uncommitted(p, run_key(stage_name, epoch))
        batch = self.batch_if_ready(tracker, stage_name, epoch)
        return self.prepare(stage, epoch, batch=batch, revision=False)

    def batch_if_ready(self, tracker: Tracker, stage_name: str, epoch: Time) -> list[Update]:
        """The progress batch of running ``stage_name`` at ``epoch`` now; raise
        ``StageNotReadyError`` naming who holds the epoch unless it is ready, with a message at
        its inputs."""
        if not tracker.ready(stage_name, epoch):
            holds = self.ledger.blockers(self.pipeline.name, stage_name, epoch, tracker=tracker)
            raise StageNotReadyError(stage_name, epoch, [h.text for h in holds])
        batch = tracker.stage_batch(stage_name, epoch)
        if not batch:
            raise StageNotReadyError(stage_name, epoch, ["no input message arrives at this epoch"])
        return batch

    def prepare(
        self, stage: Stage, epoch: Time, *, batch: list[Update], revision: bool
    ) -> Admitted:
        """In a session: resolve the run's input messages and record its start."""
        p = self.pipeline.name
        started = time.perf_counter()
        ports = [derivation(self.pipeline.stages, upstream) for upstream in stage.inputs]
        bases = [b for port in ports for b in port.bases]
        read = [(name, 0, epoch) for port in ports for name in (*port.bases, *port.chain)]
        self.ledger.read_messages(p, read)  # one query for those at the epoch (most kinds' read)
        inputs = [self.resolve(b, epoch) for b in bases]
        for port in ports:  # the messages of what is not materialized are read too
            for name in port.chain:
                refs = self.resolve(name, epoch)[0]
                inputs[bases.index(port.bases[0])][0].extend(refs)
        empty = []  # the columns of each input without data, known before the run is recorded
        for upstream, (_, paths) in zip(bases, inputs, strict=True):
            schema = None if paths else self.schema_of(upstream)
            if not paths and schema is None:
                raise StageFailedError(
                    stage.name,
                    epoch,
                    f"input {upstream!r} has no data at this epoch and no message with data "
                    "yet to take its columns from",
                )
            empty.append(schema)
        attempt = new_attempt()
        any_build = any(port.build is not None for port in ports)
        work = StageWork(
            pipeline=p,
            stage=stage.name,
            epoch=epoch,
            output_time=stage.output_time(epoch),
            attempt=attempt,
            revision=revision,
            lazy_spark=self.lazy_spark,
            store=self.store,
            ledger=self.ledger,
            state=self.state,
            inputs=inputs,
            read_schemas=[self.pipeline.stage(u).schema for u in bases],
            empty=empty,
            derive=[(len(port.bases), port.build) for port in ports] if any_build else [],
            on_round=self.on_round,
            below=tuple(followers(self.pipeline.stages, stage.name)) if stage.partial else (),
            sort_key=sort_key(self.pipeline.stages, stage.name),
            carried=tuple(run_of(stage).carried(stage, self.ledger, p, epoch)),
            expectations=self.pipeline.expectations(stage.name),
        )
        if self._instant(stage, work):
            return Admitted(stage, epoch, batch, revision, new_run_id(), work, started, False)
        try:
            run_id = self.ledger.start_run(p, stage.name, epoch, attempt)
        except LedgerStorageError as err:
            raise_during(err, p, stage.name, epoch)
            raise
        return Admitted(stage, epoch, batch, revision, run_id, work, started)

    def resolve(self, upstream: str, epoch: Time) -> Resolved:
        """The messages of ``upstream`` a run at ``epoch`` reads (its kind says which: those at
        ``epoch``, or a dimension's table as of it): references, each at its own time, and
        data paths."""
        messages = messages_read(self.pipeline, self.ledger, upstream, epoch)
        refs = [MessageRef(upstream, m.port, m.time, m.attempt) for m in messages]
        return refs, [m.path for m in messages if m.path]

    def schema_of(self, stage: str, *, within: frozenset[str] = frozenset()) -> StructType | None:
        """A stage's output columns: declared, else those of its latest message with data, else
        those its plan gives over empty inputs (a stage in a loop before the loop's first
        message: the loop's feedback adds no rows yet), else None. ``within`` holds the stages
        whose columns are being found (a loop is followed once)."""
        spec = self.pipeline.stage(stage)
        if spec.schema is not None:
            return spec.schema
        latest = self.ledger.latest_message(self.pipeline.name, stage, 0)
        if latest is not None and latest.path is not None:
            return spark_schema([latest.path]) or self.spark.read.parquet(latest.path).schema
        if stage in within:
            return None
        frames = []
        for upstream in spec.inputs:
            schema = self.schema_of(upstream, within=within | {stage})
            frames.append(None if schema is None else empty_frame(self.spark, schema))
        try:
            planned = spec.plan(frames)
            return None if planned is None else planned.schema
        except Exception:  # the user's function on no rows: its run says what is wrong
            return None

    # -- work ----------------------------------------------------------------------------------

    def instant(self, run: Admitted | RunResult | None) -> Admitted | None:
        """``run`` when it is admitted and its work is bookkeeping alone (a stage not
        materialized, a sink that links its input's files; no state, no expectations to check):
        worked and recorded in the transaction that admitted it, it costs no transaction of its
        own, and its run record is one row written with its commit. Else None."""
        return run if isinstance(run, Admitted) and not run.start_recorded else None

    @staticmethod
    def _instant(stage: Stage, work: StageWork) -> bool:
        if stage.holds_state or work.expectations:
            return False
        return run_of(stage).instant(stage, work)

    def _finish(
        self,
        run: Admitted,
        status: RunStatus,
        batch_id: int | None = None,
        error: str | None = None,
    ) -> None:
        """Record how ``run`` ended (with its start, for an instant run)."""
        p, stage, attempt = self.pipeline.name, run.stage.name, run.work.attempt
        start = None if run.start_recorded else RunStart(p, stage, run.epoch, attempt)
        self.ledger.finish_run(run.run_id, status, batch_id=batch_id, error=error, start=start)

    def work(self, run: Admitted) -> Worked:
        """The Spark work of a run, holding no ledger lock (see the module docs)."""
        checked: list[CheckEntry] = []
        try:
            produced = run_of(run.stage).compute(run.stage, run.work)
            checked = self._check(run, produced)
        except Exception as err:
            found = disk.failure(err)
            stopped = err if isinstance(err, ExpectationFailed) else None
            try:
                with self.ledger.atomic():
                    error = first_line(err) if stopped is None else stopped.cause
                    self._finish(run, RunStatus.FAILED, error=error)
                    if stopped is not None and stopped.results:
                        self.ledger.record_checks(
                            self.pipeline.name,
                            run.stage.name,
                            run.epoch,
                            run.work.attempt,
                            stopped.results,
                            run_id=run.run_id,
                            committed=False,
                        )
            except LedgerStorageError:
                if found is None:  # the ledger's disk is the trouble, not the stage
                    raise
                # The same disk refused the record: the run's own error says more. A run
                # recorded as started and never finished is what a killed run leaves too.
            if isinstance(err, StageFailedError):
                raise
            if stopped is not None and stopped.stopped_by is not None:
                by = stopped.stopped_by
                raise ExpectationFailedError(
                    run.stage.name, run.epoch, by.expectation, by.rows_failing, by.rows_checked
                ) from err
            if stopped is not None:
                raise StageFailedError(run.stage.name, run.epoch, stopped.cause) from err
            if found is not None:
                path = str(run.work.attempt_dir())
                raise StageWriteError(run.stage.name, run.epoch, path, found) from err
            unseen = self.store.unseen(err)
            if unseen is not None:
                raise StageFailedError(
                    run.stage.name, run.epoch, unseen[1], file=unseen[0]
                ) from err
            raise StageFailedError(run.stage.name, run.epoch, first_line(err)) from err
        finally:
            run.work.clean()
        faults.reach(FaultPoint.ATTEMPT_WRITTEN)
        return Worked(run, produced, tuple(checked))

    def _check(self, run: Admitted, produced: Produced) -> list[CheckEntry]:
        """The stage's expectations checked on every row the run produced (its output and
        its quarantine); a ``fail`` one with failing rows removes what the run wrote and raises
        ``ExpectationFailed`` (``pipelines.run.expectations``)."""
        if not run.work.expectations:
            return []
        if produced.checked is not None:  # counted by its write
            return produced.checked
        paths = [f.path for f in produced.files if f.path]
        if produced.quarantine is not None:
            paths.append(str(produced.quarantine))
        try:
            return expectations.check(self.spark, run.work.expectations, paths)
        except ExpectationFailed:
            for written in (produced.written, produced.quarantine):
                if written is not None:
                    shutil.rmtree(written, ignore_errors=True)
            if produced.abandoned is not None:
                produced.abandoned()
            raise

    # -- finish --------------------------------------------------------------------------------

    def finish(self, worked: Worked) -> RunResult:
        """In a session: commit the run's output and progress, and finish its run record, in
        one transaction (an iterative stage's last round ends in it too); then what follows a
        commit (``conclude``)."""
        return self.conclude(self.record(worked))

    def record(self, worked: Worked) -> Recorded:
        """In a session, in the caller's transaction if it has one (else in one of its own):
        commit the run's output and progress and finish its run record. Nothing that must
        follow the commit happens here: the caller calls ``conclude`` once it is durable."""
        p = self.pipeline.name
        run, produced = worked.run, worked.produced
        stage, epoch, attempt = run.stage, run.epoch, run.work.attempt
        if run.revision:
            key, kind = f"revise:{stage.name}:{epoch}:{attempt}", RunKind.REVISION
        else:
            key, kind = run_key(stage.name, epoch), RunKind.RUN
        try:
            with self.ledger.atomic():
                if produced.in_commit is not None:
                    produced.in_commit(self.ledger)
                result = self.ledger.commit(
                    p,
                    run.batch if produced.announces else [u for u in run.batch if u[2] < 0],
                    key=key,
                    messages=self._entries(worked),
                    origin=Origin.stage(stage.name, epoch, run=kind),
                )
                status = RunStatus.DONE_ALREADY if result.repeated else RunStatus.SUCCEEDED
                self._finish(run, status, batch_id=result.batch_id)
                if not result.repeated and (worked.checked or produced.quarantine):
                    self._record_checks(worked)
        except LedgerStorageError as err:
            # Rolled back: the attempt stays as a killed run leaves it, never seen, and is
            # collected as garbage later (``Runtime.collect_garbage``).
            raise_during(err, p, stage.name, epoch)
            raise
        return Recorded(worked, result.batch_id, result.repeated)

    def conclude_before(
        self, recorded: Sequence[Recorded], admitted: Admitted | RunResult | None
    ) -> tuple[list[RunResult], Admitted | RunResult | None]:
        """``conclude`` the runs committed in the transaction that admitted ``admitted``, in
        order; the clock of each, and of ``admitted``, is moved past the concluding of those
        before it (each run's seconds are its own)."""
        finished: list[RunResult] = []
        spent = 0.0
        for r in recorded:
            began = time.perf_counter()
            run = dataclasses.replace(r.worked.run, started=r.worked.run.started + spent)
            worked = dataclasses.replace(r.worked, run=run)
            finished.append(self.conclude(dataclasses.replace(r, worked=worked)))
            spent += time.perf_counter() - began
        if isinstance(admitted, Admitted) and spent:
            admitted = dataclasses.replace(admitted, started=admitted.started + spent)
        return finished, admitted

    def conclude(self, recorded: Recorded) -> RunResult:
        """After a run's commit is durable: publish what it committed (its state, its sink),
        or remove what it wrote when another process committed the run first."""
        run, produced = recorded.worked.run, recorded.worked.produced
        stage, epoch = run.stage, run.epoch
        if recorded.repeated:  # another process committed this run first: ours is not seen
            if produced.written is not None:
                shutil.rmtree(produced.written, ignore_errors=True)
            if produced.abandoned is not None:
                produced.abandoned()
            return RunResult(stage.name, epoch, RunStatus.DONE_ALREADY)
        faults.reach(FaultPoint.BEFORE_PUBLISH)
        if produced.committed is not None:
            produced.committed(recorded.batch_id)
        return RunResult(
            stage.name,
            epoch,
            RunStatus.REVISED if run.revision else RunStatus.SUCCEEDED,
            run.work.attempt,
            sum(f.rows for f in produced.files),
            time.perf_counter() - run.started,
            produced.rounds,
        )

    def _record_checks(self, worked: Worked) -> None:
        """In the commit's transaction: the expectations' results, and the quarantine."""
        run, quarantine = worked.run, worked.produced.quarantine
        self.ledger.record_checks(
            self.pipeline.name,
            run.stage.name,
            run.epoch,
            run.work.attempt,
            worked.checked,
            run_id=run.run_id,
            quarantine=None
            if quarantine is None
            else (str(quarantine), *self.store.stats(quarantine)),
        )

    def _entries(self, worked: Worked) -> list[MessageEntry]:
        """One catalog entry per produced file; the first replaces the current output of a
        revised epoch and records what the run read."""
        run, produced = worked.run, worked.produced
        work = run.work
        entries = []
        for i, file in enumerate(produced.files):
            attempt = f"{work.attempt}.{i}" if produced.shared else work.attempt
            entries.append(
                MessageEntry(
                    run.stage.name,
                    0,
                    work.output_time,
                    attempt,
                    file.path,
                    file.rows,
                    file.bytes,
                    replaces=run.revision and i == 0,
                    run_time=run.epoch,
                    reads=work.reads if i == 0 else (),
                )
            )
        return entries

    def complete(self, admitted: Admitted) -> RunResult:
        """Work, then finish in a session of its own."""
        worked = self.work(admitted)
        with self.ledger.session():
            return self.finish(worked)
