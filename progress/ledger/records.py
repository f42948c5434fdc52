"""What the ledger takes and returns: plain, immutable records."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from progress.location import Location
from progress.run_status import RunStatus
from progress.timestamp import Time
from progress.tracker import Blocker


@dataclass(frozen=True)
class Registration:
    """A registered pipeline, and where its code is: an example name or ``module:attribute``
    (``None`` when whoever registered it did not say)."""

    pipeline: str
    definition: str | None = None


class RunKind(StrEnum):
    """What a stage's batch for an epoch is: its one run, or a revision of a done run."""

    RUN = "run"
    REVISION = "revision"


class OriginKind(StrEnum):
    """Who committed a batch, by kind."""

    SYSTEM = "system"
    REGISTER = "register"
    INPUT = "input"
    SEND = "send"
    CORRECTION = "correction"
    STAGE = "stage"


@dataclass(frozen=True)
class Origin:
    """Who committed a batch: registration, an input worker (its sends, its advances and close,
    its corrections), a stage run, or the system.

    ``run`` is the kind of a pipeline stage's run; ``None`` for every other batch, including
    the rounds of an iterative stage's scope (they are steps of one run, not runs).
    """

    kind: OriginKind
    node: str | None = None
    worker: int | None = None
    time: Time | None = None
    run: RunKind | None = None

    @staticmethod
    def system() -> Origin:
        return Origin(OriginKind.SYSTEM)

    @staticmethod
    def input(node: str, worker: int) -> Origin:
        return Origin(OriginKind.INPUT, node, worker)

    @staticmethod
    def correction(node: str, worker: int, time: Time) -> Origin:
        """Input worker ``worker`` of ``node`` replaced its messages at ``time``."""
        return Origin(OriginKind.CORRECTION, node, worker, time)

    @staticmethod
    def stage(node: str, time: Time, run: RunKind | None = None) -> Origin:
        """A batch of stage ``node`` at ``time``: with ``run``, the stage's run or revision.

        >>> Origin.stage("validate", 3, RunKind.REVISION).run
        <RunKind.REVISION: 'revision'>
        """
        return Origin(OriginKind.STAGE, node, None, time, run)


@dataclass(frozen=True)
class MessageRef:
    """One input message a run read: ``(stage, port, time)`` and the attempt it was."""

    stage: str
    port: int
    time: Time
    attempt: str


@dataclass(frozen=True)
class MessageEntry:
    """A message to catalog with the batch that announces it: where its data lives.

    With ``replaces``, it becomes the only current message at ``(stage, port, time)``, or with
    ``worker`` as well, the only current message of that input worker there (a correction:
    the other workers' messages stay); the attempts it replaces stay in the history.
    ``run_time`` and ``reads`` record the run that produced it and the input messages it read
    (message-level lineage).
    """

    stage: str
    port: int
    time: Time
    attempt: str
    path: str | None = None
    rows: int = 0
    bytes: int = 0
    replaces: bool = False
    run_time: Time | None = None
    reads: tuple[MessageRef, ...] = ()
    worker: int | None = None


@dataclass(frozen=True)
class MessageRecord:
    stage: str
    port: int
    time: Time
    attempt: str
    path: str | None
    rows: int
    bytes: int
    batch_id: int
    current: bool


@dataclass(frozen=True)
class CommitResult:
    """The batch a commit created, or the first one committed under the same key."""

    batch_id: int
    key: str
    repeated: bool


@dataclass(frozen=True)
class Hold:
    """A blocker in plain words: who holds an epoch back, and what it waits for."""

    blocker: Blocker
    text: str
    workers: tuple[int, ...] = ()
    """The input worker that holds it (a source's blocker: one hold per worker)."""


@dataclass(frozen=True)
class BatchRecord:
    batch_id: int
    key: str
    origin: OriginKind
    node: str | None
    worker: int | None
    time: Time | None
    n_updates: int
    committed_at: datetime


@dataclass(frozen=True)
class RunRecord:
    run_id: str
    stage: str
    time: Time
    attempt: str | None
    status: RunStatus
    pid: int | None
    started_at: datetime
    finished_at: datetime | None
    batch_id: int | None
    error: str | None


@dataclass(frozen=True)
class History:
    """Everything the ledger knows of one ``(stage, time)``."""

    pipeline: str
    stage: str
    time: Time
    batches: tuple[BatchRecord, ...]
    messages: tuple[MessageRecord, ...]
    runs: tuple[RunRecord, ...]


@dataclass(frozen=True)
class CountDifference:
    pipeline: str
    location: Location
    time: Time
    from_log: int
    in_counts: int


@dataclass(frozen=True)
class PartialBatch:
    batch_id: int
    expected_updates: int
    found_updates: int


@dataclass(frozen=True)
class VerifyReport:
    """The result of recomputing counts from the log of batches."""

    batches: int
    differences: tuple[CountDifference, ...] = ()
    partial_batches: tuple[PartialBatch, ...] = ()

    @property
    def ok(self) -> bool:
        return not (self.differences or self.partial_batches)

    def lines(self) -> list[str]:
        out = [f"{self.batches} batches checked"]
        out += [
            f"count differs: {d.pipeline} {d.location} at {d.time}: log says {d.from_log}, "
            f"counts table says {d.in_counts}"
            for d in self.differences
        ]
        out += [
            f"partial batch {p.batch_id}: {p.found_updates} of {p.expected_updates} updates"
            for p in self.partial_batches
        ]
        out.append("ok" if self.ok else "FAILED")
        return out


@dataclass(frozen=True)
class Failure:
    """The last run of a stage at ``time`` failed: why, in the sentence shown to people
    (``progress.sentences.failed_run``), and whether an input may have changed since (then
    running it again may succeed; else it would fail the same way)."""

    time: Time
    text: str
    input_changed: bool


@dataclass(frozen=True)
class StageStatus:
    """Where one stage stands: its input frontier and its epochs by state."""

    pipeline: str
    stage: str
    is_input: bool
    frontier: tuple[Time, ...]
    done: tuple[Time, ...]
    ready: tuple[Time, ...]
    running: tuple[Time, ...]
    waiting: tuple[Time, ...]
    holds: tuple[Hold, ...] = field(default=())
    stale: tuple[Time, ...] = field(default=())
    """Done epochs whose input was revised since: they will run again."""
    workers: tuple[tuple[int, Time | None], ...] = field(default=())
    """For an input: each worker and the time it holds (``None`` once closed)."""
    rounds: tuple[Time, ...] = field(default=())
    """For an iterative stage: ``Product(epoch, round)`` of each epoch whose rounds have
    started and not finished (the round a new run resumes from)."""
    failed: tuple[Failure, ...] = field(default=())
    """Each epoch whose last run failed (until a run of it starts again)."""


@dataclass(frozen=True)
class PendingUpquery:
    """A read of one key of a partial stage as of an epoch it had not processed: ``key`` is the
    key's values as a JSON list; ``filled_at`` is None until an upquery run fills it."""

    upquery_id: int
    pipeline: str
    stage: str
    key: str
    as_of: int
    requested_at: datetime
    filled_at: datetime | None = None


@dataclass(frozen=True)
class CheckEntry:
    """One expectation's result on an attempt, to record: its name, its action on failing
    rows (``warn``, ``drop`` or ``fail``), the rows it checked and those that failed it."""

    expectation: str
    action: str
    rows_checked: int
    rows_failing: int


@dataclass(frozen=True)
class CheckRecord:
    """A recorded expectation result: the attempt it checked (``run_id`` is the run's, None
    for a source's send), and whether that attempt was committed (False when a ``fail``
    expectation stopped its run)."""

    stage: str
    time: Time
    attempt: str
    run_id: str | None
    expectation: str
    action: str
    rows_checked: int
    rows_failing: int
    committed: bool
    recorded_at: datetime


@dataclass(frozen=True)
class QuarantineRecord:
    """Where the rows the ``drop`` expectations removed from an attempt are kept."""

    stage: str
    time: Time
    attempt: str
    path: str
    rows: int
    bytes: int
