"""The ledger: durable, atomic, multi-process progress and message catalog in one DuckDB file.

``Ledger`` is a facade: each method opens a session (or a transaction) and calls the module of
its concern, ``sessions``, ``registry``, ``writer``, ``inputs``, ``runs``, ``queries`` or
``verify``. A commit is one transaction holding the batch's header, its updates (the
append-only log), the catalog entries of the messages it announces, and the input worker's
capability.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from progress.antichain import Antichain
from progress.graph import Graph
from progress.ledger import (
    captures,
    checks,
    inputs,
    marks,
    queries,
    registry,
    replays,
    runs,
    timeline,
    upqueries,
    verify,
    writer,
)
from progress.ledger.captures import CaptureRecord, StreamHead, StreamMessage, StreamSnapshot
from progress.ledger.records import (
    CheckEntry,
    CheckRecord,
    CommitResult,
    History,
    Hold,
    MessageEntry,
    MessageRecord,
    MessageRef,
    Origin,
    PendingUpquery,
    QuarantineRecord,
    Registration,
    StageStatus,
    VerifyReport,
)
from progress.ledger.sessions import CommitListener, Sessions
from progress.ledger.timeline import Timeline
from progress.location import Location
from progress.run_status import RunStatus
from progress.timestamp import Time
from progress.tracker import Tracker, Update

DEFAULT_PATH = Path(".epochgate") / "ledger.duckdb"
DEFAULT_LOCK_TIMEOUT = 60.0
DEFAULT_LINGER = 0.5
"""Seconds a process keeps its ledger locked and attached after a session, for the next one
(another process that wants it gets it within a few milliseconds)."""


class Ledger:
    """One ledger file. Safe to use from several processes (and threads) at once.

    A session locks and attaches the file; after it, the file stays locked and attached for
    ``linger`` seconds without a session, so calls in a row (a send, an advance, a run) open it
    once. Another process that wants it gets it within a few milliseconds (it marks its wait,
    and this one lets go), and an exiting process lets it go first. ``linger=0`` lets it go
    after every session; ``release()`` lets it go now."""

    def __init__(
        self,
        path: str | os.PathLike[str] = DEFAULT_PATH,
        lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
        linger: float = DEFAULT_LINGER,
    ) -> None:
        self.path = Path(path)
        self.lock_timeout = lock_timeout
        self._sessions = Sessions(self.path, lock_timeout, linger)

    # -- sessions ----------------------------------------------------------------------------

    @contextmanager
    def session(self) -> Iterator[Ledger]:
        """Hold the lock and one connection across several calls (keep it short: others wait)."""
        with self._sessions.session():
            yield self

    @contextmanager
    def held(self, linger: float = 5.0) -> Iterator[Ledger]:
        """Keep the ledger locked between this process's sessions while inside, so a run of
        several stages opens it once, even with Spark work of more than the ledger's own
        ``linger`` between them: another process that wants it gets it within a few
        milliseconds, and it is let go after ``linger`` seconds without a session (on leaving,
        after the ledger's own). A session costs about 15 ms to open and close on a busy
        machine (lock, attach, schema check, detach); ``Runtime.run`` opens one per stage
        run."""
        with self._sessions.held(linger):
            yield self

    def release(self) -> None:
        """Let the file go now if this process keeps it between sessions (``linger``)."""
        self._sessions.release()

    @contextmanager
    def atomic(self) -> Iterator[Ledger]:
        """Several commits, of one pipeline or several (an iterative stage and its scope), in
        one transaction: all of them or none."""
        with self._sessions.transaction():
            yield self

    def on_commit(self, listener: CommitListener) -> None:
        """Tell ``listener`` the captured pipelines that a session of this ``Ledger`` committed
        batches for, once that session has ended (the ledger free for any waiter). Added once."""
        if listener not in self._sessions.listeners:
            self._sessions.listeners.append(listener)

    # -- graphs ------------------------------------------------------------------------------

    def register(
        self,
        pipeline: str,
        graph: Graph,
        *,
        from_start: bool = False,
        definition: str | None = None,
    ) -> str:
        """Register ``graph`` as ``pipeline``'s. Returns ``registered``, ``unchanged`` or
        ``extended``.

        Re-registering the same graph does nothing. A graph that only adds stages is accepted:
        its new stages see messages announced from now on, and with ``from_start`` also every
        current message their upstream stages have already produced. Any other change raises
        ``GraphChangeError`` naming each difference. ``definition`` says where the pipeline's
        code is (an example name or ``module:attribute``); when given, it replaces the one
        recorded.
        """
        with self._sessions.transaction() as s:
            return registry.register(
                s, pipeline, graph, from_start=from_start, definition=definition
            )

    def registered(self, pipeline: str, graph: Graph, *, definition: str | None = None) -> bool:
        """Whether registering ``graph`` (and ``definition``, when given) as ``pipeline``'s
        would change nothing."""
        with self._sessions.session() as s:
            return registry.unchanged(s, pipeline, graph, definition)

    def pipelines(self) -> list[str]:
        """The registered pipelines (not the scopes of their iterative stages)."""
        with self._sessions.session() as s:
            return registry.pipelines(s)

    def registrations(self) -> list[Registration]:
        """The registered pipelines, by name, with where their code is when known."""
        with self._sessions.session() as s:
            return registry.registrations(s)

    def graph(self, pipeline: str) -> Graph:
        """The registered graph of ``pipeline``."""
        with self._sessions.session() as s:
            return s.graph(pipeline)

    # -- commits -----------------------------------------------------------------------------

    def commit(
        self,
        pipeline: str,
        batch: Iterable[Update],
        *,
        key: str,
        messages: Sequence[MessageEntry] = (),
        origin: Origin | None = None,
    ) -> CommitResult:
        """Commit a progress batch and the catalog entries of the messages it announces, in one
        transaction. A key already committed makes this a no-op that returns the first commit.
        Updates to locations outside the registered graph are refused; nothing is committed."""
        with self._sessions.transaction() as s:
            return writer.commit(
                s,
                pipeline,
                list(batch),
                key=key,
                messages=messages,
                origin=origin or Origin.system(),
            )

    def compact(self) -> None:
        """Fold every committed batch into the counts table now (commits do it every
        ``COMPACT_EVERY`` batches on their own)."""
        with self._sessions.transaction() as s:
            writer.compact(s)

    def committed(self, pipeline: str, key: str) -> CommitResult | None:
        """The commit made under ``key``, if any."""
        with self._sessions.session() as s:
            return writer.committed(s, pipeline, key)

    def uncommitted(self, pipeline: str, key: str) -> None:
        """In a session: remember for this hold of the file that nothing is committed under
        ``key``, as the caller read in this hold (a run pending in the counts: its commit
        would have consumed its input), so that the commit under it asks no query first."""
        with self._sessions.session() as s:
            s.cache.uncommitted.add((pipeline, key))

    # -- input workers -----------------------------------------------------------------------

    def worker_time(self, pipeline: str, node: str, worker: int) -> Time | None:
        """Where an input worker's capability stands (``None`` once closed)."""
        with self._sessions.session() as s:
            return inputs.worker_time(s, pipeline, node, worker)

    def send(
        self,
        pipeline: str,
        node: str,
        worker: int,
        message: MessageEntry | None = None,
        *,
        key: str | None = None,
        port: int = 0,
        fresh: bool = False,
        advance_to: Time | None = None,
    ) -> CommitResult:
        """Commit a message from an input worker at its current time (idempotent by key); with
        ``advance_to``, then ``advance(..., advance_to, seal=True)``, both batches written
        together. Returns the send's commit. The message's time is the epoch its data was
        checked for: a worker at another time now (moved by another process since) raises
        ``WorkerMovedError``, a closed one ``ClosedHandleError``; nothing is committed. With
        ``fresh``, the caller made ``message`` for this call (an attempt no commit has used, and
        no ``key``): no earlier commit is looked for; a key committed before after all is refused
        by the batches' unique key (a DuckDB constraint error, nothing committed)."""
        if fresh and (message is None or key is not None):
            raise ValueError("fresh applies to a new message's send without a key of its own")
        key = inputs.send_key(node, worker, message, key)
        actions = [inputs.send(pipeline, node, worker, message, port=port, key=key, fresh=fresh)]
        if advance_to is not None:
            actions.append(inputs.advance(pipeline, node, worker, advance_to, seal=True))
        return self._act(pipeline, node, worker, *actions)

    def advance(
        self, pipeline: str, node: str, worker: int, time: Time, *, seal: bool = False
    ) -> CommitResult:
        """Move an input worker's capability forward to ``time``.

        To the time it is at, nothing happens (a retry returns the first commit, ``repeated``);
        below it raises ``TimeRegressionError``, after ``close`` ``ClosedHandleError``, and for
        what is not a time ``InvalidInputTimeError``. With ``seal``, every epoch it passes for
        which this worker sent nothing gets an empty message, in the same transaction: the
        worker declares those epochs complete (and empty), so every stage downstream runs
        them."""
        return self._act(
            pipeline, node, worker, inputs.advance(pipeline, node, worker, time, seal=seal)
        )

    def close(self, pipeline: str, node: str, worker: int) -> CommitResult:
        """Drop an input worker's capability: nothing more will come from it. Closing it again
        does nothing (it returns the first close, ``repeated``)."""
        return self._act(pipeline, node, worker, inputs.close(node, worker))

    def correct(
        self, pipeline: str, node: str, worker: int, message: MessageEntry, *, port: int = 0
    ) -> CommitResult:
        """Replace an input worker's current messages at the time of ``message`` (an epoch it
        has reached, or any once closed) with ``message``, as a revision: no count and no
        frontier moves, the other workers' messages stay, and every output that read a
        replaced message becomes stale (``stale``). An epoch the worker has not reached raises
        ``EpochNotReachedError``, and one it has passed where it has no message (it closed
        before it sent there) ``NothingToCorrectError``; nothing is committed."""
        return self._act(
            pipeline, node, worker, inputs.correct(pipeline, node, worker, message, port)
        )

    def _act(self, pipeline: str, node: str, worker: int, *actions: inputs.Action) -> CommitResult:
        """The worker's ``actions`` in one transaction; the first one's commit."""
        with self._sessions.transaction() as s:
            return inputs.act(s, pipeline, node, worker, *actions)[0]

    # -- replayed sources ----------------------------------------------------------------------

    def replay_positions(self, pipeline: str, node: str) -> dict[str, int]:
        """The next event to feed of each captured stream fed into replayed source ``node``
        so far, by stream id (a stream not there is at event 0)."""
        with self._sessions.session() as s:
            return replays.positions(s, pipeline, node)

    def feed_replay(
        self,
        pipeline: str,
        place: replays.Place,
        feeds: Sequence[replays.Feed],
        capability: replays.Capability,
    ) -> int:
        """Feed consecutive events of a captured stream into its ``place`` (a worker of a
        replayed source) in one transaction: one batch per event (key
        ``replay:<node>:<stream>:<index>``), and the stream's position moved past them.
        Events fed already are passed over; returns how many were fed (see
        ``progress.ledger.replays``)."""
        with self._sessions.transaction() as s:
            return replays.feed(s, pipeline, place, feeds, capability)

    # -- runs --------------------------------------------------------------------------------

    def start_run(self, pipeline: str, stage: str, time: Time, attempt: str | None = None) -> str:
        """Record that a run of ``(stage, time)`` started; returns its run id."""
        with self._sessions.transaction() as s:
            return runs.start_run(s, pipeline, stage, time, attempt)

    def finish_run(
        self,
        run_id: str,
        status: RunStatus,
        batch_id: int | None = None,
        error: str | None = None,
        *,
        start: runs.RunStart | None = None,
    ) -> None:
        """Record how a run ended (with ``start``, one whose start was not recorded: one row)."""
        with self._sessions.transaction() as s:
            runs.finish_run(s, run_id, status, batch_id, error, start=start)

    def timeline(self, pipeline: str) -> Timeline:
        """The moments recorded for ``pipeline``'s epochs: releases, arrivals, commits
        (``progress.ledger.timeline``)."""
        with self._sessions.session() as s:
            return timeline.read(s, pipeline)

    def epoch_timeline(
        self, pipeline: str, stage: str, epoch: int, reads: Mapping[str, Collection[int]]
    ) -> Timeline:
        """The moments recorded about ``stage`` at ``epoch`` only: the releases of the epochs
        of each source its input reads (``reads``) and its commit there."""
        with self._sessions.session() as s:
            return timeline.read_epoch(s, pipeline, stage, epoch, reads)

    # -- expectations -------------------------------------------------------------------------

    def record_checks(
        self,
        pipeline: str,
        stage: str,
        time: Time,
        attempt: str,
        results: Sequence[CheckEntry],
        *,
        run_id: str | None = None,
        committed: bool = True,
        quarantine: tuple[str, int, int] | None = None,
    ) -> None:
        """Record expectation results on an attempt, and its quarantine (path, rows, bytes)
        when it has one: inside the caller's transaction (``atomic``) with what they are about
        (``progress.ledger.checks``)."""
        with self._sessions.transaction() as s:
            checks.record(
                s,
                pipeline,
                stage,
                time,
                results,
                attempt=attempt,
                run_id=run_id,
                committed=committed,
                quarantine=quarantine,
            )

    def checks(
        self, pipeline: str, stage: str | None = None, time: Time | None = None
    ) -> list[CheckRecord]:
        """The recorded expectation results (of one stage, at one time, when given)."""
        with self._sessions.session() as s:
            return checks.results(s, pipeline, stage, time)

    def quarantine(
        self, pipeline: str, stage: str, attempts: Sequence[str]
    ) -> list[QuarantineRecord]:
        """The quarantines of ``attempts`` of ``stage`` (those that have one)."""
        with self._sessions.session() as s:
            return checks.quarantined(s, pipeline, stage, attempts)

    # -- pending upqueries --------------------------------------------------------------------

    def request_upqueries(
        self, pipeline: str, stage: str, keys: Sequence[str], as_of: int
    ) -> list[PendingUpquery]:
        """Record a pending read of each key (its values as a JSON list) of ``stage`` as of
        ``as_of``, in one transaction; a key already pending at that epoch is not recorded
        again. Returns the pending read of each key, in the order given."""
        with self._sessions.transaction() as s:
            return upqueries.request(s, pipeline, stage, keys, as_of)

    def pending_upqueries(self, pipeline: str, stage: str | None = None) -> list[PendingUpquery]:
        """The reads of ``pipeline`` (of ``stage``, when given) not filled yet, oldest first."""
        with self._sessions.session() as s:
            return upqueries.pending(s, pipeline, stage)

    def mark_upqueries_filled(self, upquery_ids: Sequence[int]) -> int:
        """Mark pending reads filled; returns how many of them were still pending."""
        with self._sessions.transaction() as s:
            return upqueries.mark_filled(s, upquery_ids)

    # -- captures ----------------------------------------------------------------------------

    def start_capture(
        self,
        pipeline: str,
        stage: str,
        *,
        directory: str,
        stream: str,
        port: int = 0,
        worker: int | None = None,
        from_epoch: int | None = None,
    ) -> CaptureRecord:
        """Record, in one transaction, that ``(stage, port)`` (only input worker ``worker`` of
        a source, when given) is captured into ``directory``. A directory captured now raises
        ``CaptureError``; a stopped capture's row there is replaced."""
        with self._sessions.transaction() as s:
            return captures.start(
                s,
                pipeline,
                stage,
                port=port,
                worker=worker,
                directory=directory,
                stream=stream,
                from_epoch=from_epoch,
            )

    def stop_capture(self, pipeline: str, directory: str) -> CaptureRecord:
        """Mark the capture into ``directory`` stopped; ``CaptureError`` when there is none."""
        with self._sessions.transaction() as s:
            return captures.stop(s, pipeline, directory)

    def captures(self, pipeline: str, *, active: bool = False) -> list[CaptureRecord]:
        """The captures of ``pipeline`` (only those not stopped, with ``active``)."""
        with self._sessions.session() as s:
            return captures.captures(s, pipeline, active=active)

    def capture_snapshot(
        self,
        capture: CaptureRecord,
        *,
        after: int | None,
        floor: int | None,
        history_from: int | None = None,
        tracker: Tracker | None = None,
    ) -> StreamSnapshot:
        """A captured stream as the ledger holds it now, read in one session (see
        ``progress.ledger.captures.snapshot``). Pass ``tracker``, a snapshot read in the same
        session, to save reading the counts again."""
        with self._sessions.session() as s:
            return captures.snapshot(
                s, capture, after=after, floor=floor, history_from=history_from, counts=tracker
            )

    def capture_heads(
        self, records: Sequence[CaptureRecord], *, after: int, tracker: Tracker
    ) -> dict[str, StreamHead]:
        """Per capture directory, where its stream stands (the last batch with messages after
        batch ``after``, the frontier), for the captures of one pipeline, read in one session
        with ``tracker``, that session's counts (see ``progress.ledger.captures.heads``)."""
        with self._sessions.session() as s:
            return captures.heads(s, records, after, tracker)

    def capture_current(
        self, capture: CaptureRecord, times: Sequence[int]
    ) -> tuple[StreamMessage, ...]:
        """A captured stream's current messages at ``times``, in epoch and batch order."""
        with self._sessions.session() as s:
            return captures.current(s, capture, times)

    # -- questions ---------------------------------------------------------------------------

    def tracker(self, pipeline: str) -> Tracker:
        """A tracker holding the pipeline's current counts (a snapshot)."""
        with self._sessions.session() as s:
            return queries.tracker(s, pipeline)

    def frontier(self, pipeline: str, location: Location) -> Antichain[Time]:
        return self.tracker(pipeline).frontier(location)

    def ready(self, pipeline: str, stage: str, time: Time) -> bool:
        return self.tracker(pipeline).ready(stage, time)

    def blockers(
        self, pipeline: str, stage: str, time: Time, *, tracker: Tracker | None = None
    ) -> list[Hold]:
        """Who keeps ``(stage, time)`` from being ready, in plain words. Pass ``tracker``, a
        snapshot read in the same session, to save reading the counts again."""
        with self._sessions.session() as s:
            snapshot = tracker if tracker is not None else queries.tracker(s, pipeline)
            return queries.holds(s, pipeline, snapshot, stage, time)

    def source_holds(
        self, pipeline: str, source: str, time: Time, *, tracker: Tracker | None = None
    ) -> list[Hold]:
        """The input workers of ``source`` that can still send at ``time`` or earlier."""
        with self._sessions.session() as s:
            snapshot = tracker if tracker is not None else queries.tracker(s, pipeline)
            return queries.source_output_holds(s, pipeline, snapshot, source, time)

    def message(self, pipeline: str, stage: str, port: int, time: Time) -> list[MessageRecord]:
        """The current messages committed at ``(stage, port, time)``."""
        with self._sessions.session() as s:
            return queries.message(s, pipeline, stage, port, time)

    def read_messages(self, pipeline: str, places: Sequence[tuple[str, int, Time]]) -> None:
        """``message`` of several ``(stage, port, time)`` read ahead in one query."""
        with self._sessions.session() as s:
            queries.read_messages(s, pipeline, places)

    def messages_as_of(
        self, pipeline: str, stage: str, port: int, epoch: Time
    ) -> list[MessageRecord]:
        """The content of a dimension source's output at ``epoch``: per input worker, its
        current messages with data at the latest epoch ``<= epoch`` where it has any (the
        empty messages that sealing announces leave a worker's table as it was)."""
        with self._sessions.session() as s:
            return queries.messages_as_of(s, pipeline, stage, port, epoch)

    def worker_sent(
        self, pipeline: str, node: str, worker: int, epoch: Time, *, sealed: bool = False
    ) -> bool:
        """Whether input worker ``worker`` of ``node`` has a current message with data at
        ``epoch`` (sent or corrected), or, with ``sealed``, any (one sealed empty too)."""
        with self._sessions.session() as s:
            return queries.worker_sent(s, pipeline, node, worker, epoch, sealed=sealed)

    def messages(self, pipeline: str, stage: str, port: int) -> list[MessageRecord]:
        """The current messages committed at ``(stage, port)``, at every time, in time order."""
        with self._sessions.session() as s:
            return queries.messages(s, pipeline, stage, port)

    def unmarked(self, pipeline: str, stage: str, port: int, reader: str) -> list[MessageRecord]:
        """The current messages of ``(stage, port)`` committed after ``reader``'s mark (every
        one without a mark), in time order (``progress.ledger.marks``)."""
        with self._sessions.session() as s:
            return marks.unmarked(s, pipeline, stage, port, reader)

    def mark(self, pipeline: str, stage: str, port: int, reader: str, *, through: int) -> None:
        """Mark that ``reader`` has seen every current message of ``(stage, port)`` through
        batch ``through``."""
        with self._sessions.transaction() as s:
            marks.mark(s, pipeline, stage, port, reader, through=through)

    def live_paths(self, pipeline: str) -> list[str]:
        """Every data path the pipeline may still read or is writing: current messages and
        their quarantines, and the attempts of runs whose process is alive."""
        with self._sessions.session() as s:
            return queries.live_paths(s, pipeline) + checks.live_quarantine(s, pipeline)

    def done_epochs(self, pipeline: str, stage: str) -> list[Time]:
        """The times ``stage`` has run (committed a run batch for), in order."""
        with self._sessions.session() as s:
            return queries.done_epochs(s, pipeline, stage)

    def reads(self, pipeline: str, stage: str, time: Time) -> list[MessageRef]:
        """The input messages (and their attempts) that the current output of the run
        ``(stage, time)`` read: its message-level lineage."""
        with self._sessions.session() as s:
            return queries.reads(s, pipeline, stage, time)

    def read_by(self, pipeline: str, ref: MessageRef) -> list[tuple[str, Time]]:
        """The runs ``(stage, time)`` whose current output read the message ``ref``."""
        with self._sessions.session() as s:
            return queries.read_by(s, pipeline, ref)

    def stale(self, pipeline: str) -> list[tuple[str, Time]]:
        """Runs ``(stage, time)`` whose current output read an input attempt that has since
        been replaced: they must run again (a revision replaced what they read)."""
        with self._sessions.session() as s:
            return queries.stale(s, pipeline)

    def latest_message(self, pipeline: str, stage: str, port: int) -> MessageRecord | None:
        """The most recently committed current message of ``(stage, port)`` with data."""
        with self._sessions.session() as s:
            return queries.latest_message(s, pipeline, stage, port)

    def history(self, pipeline: str, stage: str, time: Time) -> History:
        """Every batch, message attempt and run recorded for ``(stage, time)``."""
        with self._sessions.session() as s:
            return queries.history(s, pipeline, stage, time)

    def status(self, pipeline: str, *, tracker: Tracker | None = None) -> list[StageStatus]:
        """Each stage's input frontier and epochs done, ready, running and waiting, with the
        blockers of the oldest waiting epoch. Pass ``tracker``, a snapshot read in the same
        session, to save reading the counts again."""
        with self._sessions.session() as s:
            return queries.status(s, pipeline, tracker)

    # -- integrity ---------------------------------------------------------------------------

    def verify(self, pipeline: str | None = None) -> VerifyReport:
        """Recompute the counts table from the log of batches it has folded in, and check that
        every batch holds all of its updates (and no update lacks its batch). With
        ``pipeline``, only that pipeline's (and its iterative stages' scopes')."""
        with self._sessions.session() as s:
            return verify.verify(s, pipeline)
