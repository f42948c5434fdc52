"""The scheduler of a pipeline's runs: what runs next, backfills, revisions.

``Runtime`` binds a pipeline to a ledger, a Spark session, a data directory and a state store.
Spark starts when a run first needs it: given a factory instead of a session, a Runtime that
only sends checked files, advances workers or finds nothing to run starts no JVM.
``run()`` runs every ready ``(stage, epoch)`` in epoch order (upstream first), then re-runs
stale outputs; a failing stage does not keep the others from running. ``backfill`` and
``revise`` recompute done epochs with the current code; a backfill runs every epoch that can
run and names the blockers of those it left. Each single run goes through the ``Executor``
(admit, work, finish): it refuses an epoch that is not ready, reads exactly the messages
committed at the stage's inputs, and commits its output with its progress batch in one ledger
transaction. A run that fails or is killed commits nothing; a done one is never run again. A
ledger that cannot be used (``LedgerStorageError``: its disk full, its file unwritable or gone,
its lock file lost) stops the call with that error, naming the stage and epoch of any run it
stopped."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipelines.capture import follower as capture_follower
from pipelines.capture import sync as capture
from pipelines.capture.replay import replay
from pipelines.capture.start import start_capture, stop_capture
from pipelines.capture.sync import CaptureStatus
from pipelines.errors import (
    BackfillIncompleteError,
    PipelineError,
    RunFailedError,
    StageFailedError,
    StageNotReadyError,
)
from pipelines.reads.lag import EpochTimes, StageLag, epoch_times, stage_lags, worker_lateness
from pipelines.reads.lookup import KeyedReads, Lookup, StateInfo
from pipelines.reads.outputs import OutputReads
from pipelines.reads.pending import PendingReads
from pipelines.reads.subscription import Completed
from pipelines.results import RunResult, RunStatus
from pipelines.run.epochs import stage_epoch
from pipelines.run.executor import Admitted, Executor, Recorded, Worked, raise_during, run_key
from pipelines.run.expectations import ExpectationResult
from pipelines.run.garbage import collect_garbage
from pipelines.run.inputs import SourceInput
from pipelines.run.iteration import RoundCallback
from pipelines.run.kinds import run_of
from pipelines.run.published import SinkState
from pipelines.run.revisions import above, next_revision
from pipelines.run.sinks import named_target, publish_committed, sink_states, sink_targets
from pipelines.run.storage import DataStore, runtime_home
from pipelines.settings import STATE_FILE, state_path
from pipelines.spark.session import LazySpark, SparkFactory
from pipelines.stages.families import lock_name
from pipelines.stages.pipeline import Pipeline
from progress import Target, Time, Tracker
from progress.errors import LedgerStorageError
from progress.lateness import WorkerLateness
from progress.ledger import Ledger, PendingUpquery, StageStatus
from state_store import KeyedState

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["STATE_FILE", "RunResult", "RunStatus", "Runtime", "run_key"]


class Runtime:
    """A pipeline bound to a ledger, a Spark session and a data directory.

    ``spark`` is a session, or a function of no arguments that starts one (``spark_session``):
    it is called the first time something needs Spark, once."""

    def __init__(
        self,
        pipeline: Pipeline,
        ledger: Ledger,
        spark: SparkSession | SparkFactory,
        data_root: Path,
        *,
        from_start: bool = False,
        state: KeyedState | None = None,
        on_round: RoundCallback | None = None,
    ) -> None:
        self.pipeline = pipeline
        self.ledger = ledger
        self.state = state or KeyedState(state_path(ledger.path))
        self.store = DataStore(data_root)
        self.graph = pipeline.register(ledger, from_start=from_start)
        self._spark = LazySpark(spark)
        self.executor = Executor(
            pipeline, ledger, self._spark, self.store, self.state, on_round=on_round
        )
        self._order = self.graph.depths()
        # A commit that changes a captured stream syncs its capture soon after (``run`` waits).
        self._follower = capture_follower.follow(ledger)
        self._runs = 0  # calls of run, run_stage, backfill, revise under way (``_settled``)

    @property
    def spark(self) -> SparkSession:
        """The Spark session, started now if nothing has needed it yet."""
        return self._spark.session()

    @property
    def spark_started(self) -> bool:
        """Whether this Runtime has a Spark session (given, or started by a use)."""
        return self._spark.started

    @property
    def on_round(self) -> RoundCallback | None:
        """Told of each round of an iterative stage (settable)."""
        return self.executor.on_round

    @on_round.setter
    def on_round(self, callback: RoundCallback | None) -> None:
        self.executor.on_round = callback

    @property
    def home(self) -> Path:
        """The directory of the ledger file (absolute): the state store lives there unless given
        elsewhere, and a sink's relative path is resolved against it (never the working one)."""
        return runtime_home(self.ledger.path)

    def sink_path(self, sink: str) -> Path:
        """The directory ``sink`` publishes to (``PATH/epoch=N``)."""
        return named_target(self.pipeline, sink, self.home).root

    def publish_sinks(self, *, recheck: bool = False) -> list[tuple[str, Time]]:
        """Publish each committed sink epoch its sink does not show, of those since the sink's
        mark or with ``recheck`` of all (``run()`` does this first); the ``(sink, epoch)`` done."""
        return publish_committed(
            self.ledger, self.pipeline.name, sink_targets(self.pipeline, self.home), recheck=recheck
        )

    def sinks(self) -> list[SinkState]:
        """Each sink's format, location, last published epoch and table version."""
        return sink_states(self.ledger, self.pipeline.name, sink_targets(self.pipeline, self.home))

    def input(self, source: str, worker: int = 0) -> SourceInput:
        """The handle of one worker of a source."""
        return SourceInput(self, source, worker)

    def collect_garbage(self, older_than: float = 3600.0) -> list[Path]:
        """Remove data of attempts that were never committed (killed or lost runs)."""
        return collect_garbage(self.pipeline, self.ledger, self.store, older_than)

    # -- what can run --------------------------------------------------------------------------

    def pending(self, tracker: Tracker | None = None) -> list[tuple[str, Time]]:
        """Every ``(stage, epoch)`` with messages waiting, in epoch order, upstream first."""
        tracker = tracker or self.ledger.tracker(self.pipeline.name)
        waiting = {(loc.node, t) for loc, t, _ in tracker.pointstamps() if isinstance(loc, Target)}
        return sorted(waiting, key=lambda item: (item[1], self._order[item[0]]))

    def ready(self, tracker: Tracker | None = None) -> list[tuple[str, Time]]:
        """Every pending ``(stage, epoch)`` that is ready, in the order ``pending`` gives."""
        tracker = tracker or self.ledger.tracker(self.pipeline.name)
        return [(s, t) for s, t in self.pending(tracker) if tracker.ready(s, t)]

    def stale(self) -> list[tuple[str, Time]]:
        """Done ``(stage, epoch)`` runs whose input was revised since, earliest first."""
        found = self.ledger.stale(self.pipeline.name)
        return sorted(found, key=lambda item: (item[1], self._order[item[0]]))

    def exclusive(self, stage_name: str) -> AbstractContextManager[None]:
        """Hold the right to run ``stage_name`` when it holds state (its epochs read the state
        the one before left, so one run of it at a time, in any process); else nothing.
        Runs of this Runtime take it themselves; hold it to keep it across several runs.
        Never take it inside a ledger session: a holder may wait for the ledger. The partial
        stages keyed alike share one (``pipelines.stages.families.lock_name``): their epoch runs,
        fills and evictions never interleave."""
        if not self.pipeline.stage(stage_name).holds_state:
            return nullcontext()
        return self.state.writer(self.pipeline.name, lock_name(self.pipeline.stages, stage_name))

    # -- replayed sources ----------------------------------------------------------------------

    def replay(self) -> int:
        """Feed the pipeline's replayed sources (``Pipeline.replay``) what their captures hold
        now: each capture is checked whole first (a stream that breaks the protocol, a damaged
        log or data file raises ``StreamError`` naming the directory, the event and the rule,
        and nothing of this call is committed), then its events not fed yet are committed in
        order with the stream's position: a replay stopped anywhere resumes at the next event.
        Returns the number of events fed."""
        return replay(self)

    @property
    def replayed(self) -> bool:
        """Whether the pipeline has replayed sources."""
        return bool(self.pipeline.replayed_sources())

    # -- runs ----------------------------------------------------------------------------------

    def run(
        self, on_result: Callable[[RunResult], None] | None = None, *, replay: bool = True
    ) -> list[RunResult]:
        """Run every ready ``(stage, epoch)`` in epoch order, then re-run stale outputs (those
        that read an attempt a revision has replaced), until nothing is left. A pipeline with
        replayed sources is fed (``replay()``) first unless ``replay=False``.

        A stage run that fails commits nothing and that stage is not tried again in this call;
        every run that does not depend on its output goes on (readiness holds back those that
        do). Then, if any failed, ``RunFailedError`` lists each failure with the runs made.

        One ledger transaction per stage run commits the previous run, picks the next, resolves
        its input and records its start, with one look at the counts (a run whose work is
        bookkeeping alone is worked and committed in the one that admits it). Between them the
        ledger stays open for this process unless another process wants it (``Ledger.held``): Spark
        works with the ledger free for whoever asks. A stateful stage's writer lock is held
        from before its work until its commit or its failure."""
        with self.ledger.held(), self._settled():
            return self._run(on_result, replay)

    def _run(self, on_result: Callable[[RunResult], None] | None, replay: bool) -> list[RunResult]:
        if replay and self.replayed:
            self.replay()
        self.publish_sinks()  # what a killed run committed but did not publish
        results: list[RunResult] = []
        failed: dict[str, StageFailedError] = {}  # by stage: not tried again in this call
        revised: set[tuple[str, Time]] = set()
        worked: Worked | None = None
        writer = ExitStack()  # the writer lock of a stateful run not committed yet

        def report(result: RunResult) -> None:
            results.append(result)
            if on_result is not None:
                on_result(result)

        with writer:
            while True:
                finished, admitted, stale = self._next(worked, failed)
                worked = None
                writer.close()
                for result in finished:
                    report(result)
                if isinstance(admitted, RunResult):
                    report(admitted)
                elif admitted is not None:
                    writer.enter_context(self.exclusive(admitted.stage.name))  # no ledger held
                    try:
                        worked = self.executor.work(admitted)
                    except StageFailedError as err:
                        writer.close()
                        failed[admitted.stage.name] = err
                elif stale:
                    try:
                        self._revise_stale(stale, revised, report)
                    except StageFailedError as err:  # the stage revised: not always stale[0]
                        failed[err.stage] = err
                elif failed:
                    raise RunFailedError(self.pipeline.name, results, list(failed.values()))
                else:
                    return results

    def _next(
        self, worked: Worked | None, failed: dict[str, StageFailedError]
    ) -> tuple[list[RunResult], Admitted | RunResult | None, list[tuple[str, Time]]]:
        """In one ledger transaction: commit ``worked``, then admit the next ready run of a stage
        not in ``failed`` (one whose input cannot be read joins it), worked and committed on the
        way when instant (``Executor.instant``), or else list the stale outputs."""
        admitted: Admitted | RunResult | None = None
        recorded: list[Recorded] = []
        try:
            with self.ledger.session():
                with nullcontext() if worked is None else self.ledger.atomic():
                    if worked is not None:
                        recorded.append(self.executor.record(worked))
                    admitted, stale = self._admit_next(failed)
                    with self.ledger.atomic() if self.executor.instant(admitted) else nullcontext():
                        while now := self.executor.instant(admitted):
                            try:
                                recorded.append(self.executor.record(self.executor.work(now)))
                            except StageFailedError as err:
                                failed[now.stage.name] = err
                            admitted, stale = self._admit_next(failed)
                return (*self.executor.conclude_before(recorded, admitted), stale)
        except LedgerStorageError as err:  # named after the run it stopped
            if isinstance(run := admitted if worked is None else worked.run, Admitted):
                raise_during(err, self.pipeline.name, run.stage.name, run.epoch)
            raise

    def _admit_next(
        self, failed: dict[str, StageFailedError]
    ) -> tuple[Admitted | RunResult | None, list[tuple[str, Time]]]:
        """The next ready run admitted (none whose input a stale output would change), else
        the stale outputs."""
        tracker = self.ledger.tracker(self.pipeline.name)
        stale = [(s, t) for s, t in self.stale() if s not in failed]
        changes = self._outputs.finality.changes
        while ready := [
            (s, t)
            for s, t in self.ready(tracker)
            if s not in failed and not any(n != s and changes((n, a), s, t) for n, a in stale)
        ]:
            try:
                return self.executor.admit(*ready[0], tracker=tracker), []
            except StageFailedError as err:
                failed[ready[0][0]] = err
        return None, stale

    @contextmanager
    def _settled(self) -> Iterator[None]:
        """Run, run_stage, backfill and revise return with the captures their commits changed
        synced (once, by the outermost): others follow within ``capture_follower.SYNC_DELAY``."""
        self._runs += 1
        try:
            yield
        finally:
            self._runs -= 1
            if not self._runs:
                self._follower.settle()

    def run_stage(self, stage_name: str, epoch: Time) -> RunResult:
        """Run ``stage_name`` for ``epoch`` once (see the module docs)."""
        self.pipeline.stage(stage_name)
        stage_epoch(stage_name, epoch)
        with self._settled(), self.exclusive(stage_name):
            try:
                with self.ledger.session():  # one connection for every question before the work
                    admitted = self.executor.admit(stage_name, epoch)
                if isinstance(admitted, RunResult):
                    return admitted
                return self.executor.complete(admitted)
            except LedgerStorageError as err:
                raise_during(err, self.pipeline.name, stage_name, epoch)
                raise

    def _revise_stale(
        self,
        stale: list[tuple[str, Time]],
        revised: set[tuple[str, Time]],
        report: Callable[[RunResult], None],
    ) -> None:
        """Re-run the first stale output in revision order (``pipelines.run.revisions``) and,
        for a stateful stage, the epochs after it, reporting each run as it commits (those
        before a failure too). Stale again after this loop ``revised`` it: a cycle."""
        stage, epoch = next_revision(self.pipeline.stages, stale, self._above, revised)

        def done(result: RunResult) -> None:
            revised.add((result.stage, result.epoch))
            report(result)

        self._revise(stage, [epoch], done)

    @cached_property
    def _above(self) -> dict[str, frozenset[str]]:
        """``pipelines.run.revisions.above`` of every stage."""
        return {name: above(self.pipeline.stages, name) for name in self.pipeline.stages}

    def backfill(
        self,
        stage_name: str,
        epochs: Sequence[Time],
        on_result: Callable[[RunResult], None] | None = None,
        *,
        downstream: bool = True,
    ) -> list[RunResult]:
        """Backfill ``stage_name`` over ``epochs`` with the current code and inputs: epochs it
        has run are revised, epochs it has not run yet are run, in order, then (unless
        ``downstream`` is False: someone else re-runs them) every output the backfill made
        stale is re-run in epoch order. Frontiers never move back and nothing counts twice.

        An epoch it has not run that is not ready either is left, and the epochs after it are
        still tried (for a stage that holds state, readiness leaves them too: each needs the
        one before). When any were left, ``BackfillIncompleteError`` says who holds each, with
        the runs the backfill made."""
        p = self.pipeline.name
        self.executor.runnable(stage_name)
        epochs = [stage_epoch(stage_name, e) for e in epochs]
        done = set(self.ledger.done_epochs(p, stage_name))
        results: list[RunResult] = []
        left: dict[Time, tuple[str, ...]] = {}

        def report(result: RunResult) -> None:
            results.append(result)
            if on_result is not None:
                on_result(result)

        redo = sorted(e for e in set(epochs) if e in done)
        with self._settled(), self.exclusive(stage_name):
            if redo:
                self._revise(stage_name, redo, report)
            for epoch in sorted(set(epochs) - done):
                try:
                    report(self.run_stage(stage_name, epoch))
                except StageNotReadyError as err:
                    left[epoch] = err.holds
        revised = {(r.stage, r.epoch) for r in results}
        while downstream and (stale := self.stale()):
            self._revise_stale(stale, revised, report)
        if left:
            raise BackfillIncompleteError(p, stage_name, results, left)
        return results

    def revise(self, stage_name: str, epochs: Sequence[Time]) -> list[RunResult]:
        """Recompute done epochs of a stage with the current code and inputs (a backfill).

        Each new attempt replaces the old one; frontiers do not move; downstream outputs that
        read the old attempt become stale and ``run()`` recomputes them. A stage that holds
        state is recomputed from the earliest revised epoch onward, from the state before it.
        """
        results: list[RunResult] = []
        self._revise(stage_name, epochs, results.append)
        return results

    def _revise(
        self, stage_name: str, epochs: Sequence[Time], report: Callable[[RunResult], None]
    ) -> None:
        """``revise``, reporting each run as it commits."""
        p = self.pipeline.name
        stage = self.executor.runnable(stage_name)
        epochs = [stage_epoch(stage_name, e) for e in epochs]
        done = self.ledger.done_epochs(p, stage_name)
        if missing := [e for e in epochs if e not in done]:
            raise PipelineError(
                f"stage {stage_name!r} has not run epoch(s) {missing}: nothing to revise "
                "(run them instead)"
            )
        with self._settled(), self.exclusive(stage_name):
            for epoch in run_of(stage).revision_epochs(
                stage, self.state, self.ledger, p, requested=epochs, done=done
            ):
                with self.ledger.session():
                    admitted = self.executor.prepare(stage, epoch, batch=[], revision=True)
                report(self.executor.complete(admitted))

    # -- where it stands ----------------------------------------------------------------------

    def status(self) -> list[StageStatus]:
        """Where each stage stands: its input frontier, its epochs done, ready, running, waiting
        and stale, and who holds the oldest waiting one (what ``epochgate status`` prints)."""
        return self.ledger.status(self.pipeline.name)

    def expectations(
        self, stage: str | None = None, epoch: Time | None = None
    ) -> list[ExpectationResult]:
        """The recorded results of the pipeline's expectations (of one stage, at one epoch,
        when given), oldest first; those of runs a ``fail`` expectation stopped too."""
        if stage is not None:
            self.pipeline.stage(stage)
        records = self.ledger.checks(self.pipeline.name, stage, epoch)
        return [ExpectationResult.of(r) for r in records]

    def lag(self) -> list[StageLag]:
        """Per stage: its latest final epoch, when its input and its output there became
        complete and final, the latency between, and its oldest open epoch with its age and
        what holds it (``pipelines.reads.lag``)."""
        stages, freshness = self.pipeline.stages, self.pipeline.fresh_within
        return stage_lags(stages, self._outputs.finality, self.ledger, freshness)

    def epoch_times(self, stage: str, epoch: int) -> EpochTimes:
        """``stage``'s run at ``epoch`` in time: when its input was complete, its output
        committed, and whether it is final (``pipelines.reads.lag``)."""
        return epoch_times(self.pipeline.stages, self._outputs.finality, self.ledger, stage, epoch)

    def lateness(self, source: str, *, last: int = 20) -> list[WorkerLateness]:
        """Each worker of ``source``: how long after its first worker it released each of the
        last ``last`` epochs, median and worst (``progress.lateness``)."""
        if not self.pipeline.stage(source).is_source:
            raise PipelineError(f"{source!r} is not a source: only input workers are late")
        return worker_lateness(self.pipeline.stages, self.ledger, self.pipeline.name, source, last)

    def blockers(self, stage_name: str, epoch: Time) -> list[str]:
        """What keeps ``stage_name`` from running ``epoch``, one sentence per holder ("source
        orders, worker 0, still holds epoch 1"); none when it is ready or done."""
        self.pipeline.stage(stage_name)  # an unknown name: the one sentence every call gives
        return [h.text for h in self.ledger.blockers(self.pipeline.name, stage_name, epoch)]

    # -- keyed state ---------------------------------------------------------------------------

    def lookup(
        self,
        stage: str,
        keys: Sequence[Any],
        *,
        as_of: int | None = None,
        wait: float | bool = False,
    ) -> Lookup:
        """The state rows of ``keys`` (scalars for a one-column key, else tuples in key-column
        order) in a stateful or aggregate stage, as of epoch ``as_of`` (None: the last it has
        processed). A partial stage fills its holes among them with one upquery first. An epoch
        the stage has not processed yet raises ``StageNotReadyError`` naming what holds it, at
        once or after waiting ``wait`` seconds for another process to run it."""
        return self._reads.lookup(stage, keys, as_of, wait)

    def evict(self, stage: str, keys: Sequence[Any]) -> list[Any]:
        """Turn present keys of a partial stage into holes, there and in the partial stages
        below it (their state and history deleted); returns the keys that were present, in order."""
        return self._reads.evict(stage, keys)

    def state_info(self, stage: str) -> StateInfo:
        """A keyed stage's state: partial or not, present keys, rows, bytes, and the hits,
        misses, upqueries and evictions of its reads."""
        return self._reads.state_info(stage)

    def request(self, stage: str, keys: Sequence[Any], as_of: int) -> list[PendingUpquery]:
        """Record a read of ``keys`` of a partial stage as of ``as_of`` as pending upqueries in
        the ledger (one per key; a key already pending at that epoch is not recorded again),
        for an upquery run to fill once the stage has processed ``as_of``. Keys are checked as
        ``lookup`` checks them; a full stage raises ``StateReadError``."""
        return self.pending_reads.request(stage, keys, as_of)

    @cached_property
    def pending_reads(self) -> PendingReads:
        """The pending upqueries of this pipeline's partial stages (``pipelines.reads.pending``)."""
        return PendingReads(self._reads)

    @cached_property
    def _reads(self) -> KeyedReads:
        return KeyedReads(self)

    # -- captures ------------------------------------------------------------------------------

    def capture(
        self,
        stage: str,
        into: str | Path,
        *,
        from_epoch: int | None = None,
        worker: int | None = None,
    ) -> CaptureStatus:
        """Record ``stage``'s output stream (only input worker ``worker`` of a source, when
        given: its messages and its capability) into the directory ``into``, which must hold
        no capture yet, from epoch ``from_epoch`` (default: the stream's frontier now; messages
        committed at epochs still open are recorded too). Then every commit that changes the
        stream appends its events (``pipelines.capture.sync``). Returns its first sync's status."""
        return start_capture(
            self.pipeline,
            self.ledger,
            self.executor.schema_of,
            stage,
            into,
            from_epoch=from_epoch,
            worker=worker,
        )

    def stop_capture(self, into: str | Path) -> CaptureStatus:
        """Bring the capture into ``into`` up to the ledger one last time, then stop it: its
        directory stays as it is, a complete stream up to that point."""
        return stop_capture(self.ledger, self.pipeline.name, into)

    def captures(self) -> list[CaptureStatus]:
        """Every capture of the pipeline, stopped ones too, with where each stands."""
        return [capture.status(self.ledger, c) for c in self.ledger.captures(self.pipeline.name)]

    def sync_captures(self) -> int:
        """Bring every capture of the pipeline that is not stopped up to the ledger now (a
        commit does it by itself; this repairs one a crash left behind). Events appended."""
        return capture.sync_pipeline(self.ledger, self.pipeline.name)

    # -- outputs -------------------------------------------------------------------------------

    def read(
        self,
        stage: str,
        epoch: Time,
        *,
        complete: bool = True,
        wait: float | bool = False,
        quarantine: bool = False,
    ) -> DataFrame:
        """The output of ``stage`` at ``epoch`` as a stage reading it then sees it (all current
        messages at ``epoch``; a dimension source's table as of ``epoch``), once it is final
        (``pipelines.reads.final``): else ``EpochNotCompleteError`` names what holds it.
        ``wait``: seconds to wait for other processes to make it final first. ``complete=False``
        reads whatever is committed now, final or not. ``quarantine=True``: the rows its
        ``drop`` expectations removed instead. A final epoch without rows is an empty frame
        with the stage's columns."""
        return self._outputs.read(stage, epoch, complete=complete, wait=wait, quarantine=quarantine)

    def read_arrow(
        self,
        stage: str,
        epoch: Time,
        *,
        complete: bool = True,
        wait: float | bool = False,
        quarantine: bool = False,
    ) -> pa.Table:
        """``read``'s rows as a ``pyarrow.Table`` (typed as ``DataFrame.toArrow()`` types them,
        timestamps in UTC), read from the committed files in this process with no Spark job;
        only a stage that is not materialized is computed through Spark."""
        return self._outputs.arrow(
            stage, epoch, complete=complete, wait=wait, quarantine=quarantine
        )

    def subscribe(
        self, stage: str, *, from_epoch: int = 0, poll: float = 1.0, timeout: float | None = None
    ) -> Iterator[Completed]:
        """``stage``'s epochs from ``from_epoch`` on, each once it is final and again when a
        revision replaces it, until every input closed or ``timeout`` seconds pass without one
        (``pipelines.reads.subscription``)."""
        return self._outputs.subscribe(stage, from_epoch=from_epoch, poll=poll, timeout=timeout)

    @cached_property
    def _outputs(self) -> OutputReads:
        return OutputReads(self.pipeline, self.ledger, self.executor, self._above)
