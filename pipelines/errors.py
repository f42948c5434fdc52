"""Every error epochgate raises on purpose, in one hierarchy under ``EpochgateError``.

Those of pipelines (definitions, input validation, stage runs, reads, sinks, clocks, engines,
the command line) are defined here; those of the progress core, the ledger, captured streams
and the state store are defined with them and named here too, so that a caller catches any of
them from ``pipelines.errors``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from pipelines.results import RunResult
from progress import Time
from progress.capture import StreamError
from progress.disk import DiskFailure
from progress.errors import (
    CaptureError,
    ClosedHandleError,
    CycleError,
    DanglingPortError,
    DatabaseFileError,
    DuplicateNodeError,
    EpochgateError,
    EpochNotReachedError,
    FaultSpecError,
    ForeignLocationError,
    GraphChangeError,
    GraphError,
    HandleError,
    InvalidInputTimeError,
    InvalidSummaryError,
    InvalidTimeError,
    LedgerError,
    LedgerFullError,
    LedgerLockLostError,
    LedgerLockTimeoutError,
    LedgerMissingError,
    LedgerSchemaError,
    LedgerStorageError,
    LedgerUnwritableError,
    NothingToCorrectError,
    ProgressError,
    StateStoreError,
    TimeRegressionError,
    UnknownLocationError,
    UnknownNodeError,
    UnknownPortError,
    UnregisteredPipelineError,
    WorkerError,
    WorkerMovedError,
    WorkerRuleError,
    WorkerTimeError,
)
from progress.sentences import expectation_failed, failed_expectation, no_such_stage

__all__ = [
    "EpochgateError",
    # pipelines: definitions, inputs, runs, reads
    "PipelineError",
    "PipelineDefinitionError",
    "UnknownStageError",
    "InputValidationError",
    "InputChangedError",
    "InvalidEpochError",
    "StageNotReadyError",
    "EpochNotCompleteError",
    "ReadPendingError",
    "StateReadError",
    "StageFailedError",
    "ExpectationFailedError",
    "StageWriteError",
    "BackfillIncompleteError",
    "RunFailedError",
    "SinkPublishError",
    "ClockError",
    # engines and the command line
    "SparkUnavailableError",
    "ConnectServerError",
    "SailServerError",
    "UsageError",
    "PipelineChoiceError",
    "PipelineReferenceError",
    # input workers
    "HandleError",
    "WorkerError",
    "WorkerTimeError",
    "WorkerRuleError",
    "TimeRegressionError",
    "InvalidInputTimeError",
    "ClosedHandleError",
    "WorkerMovedError",
    "EpochNotReachedError",
    "NothingToCorrectError",
    # the progress core
    "ProgressError",
    "InvalidTimeError",
    "InvalidSummaryError",
    "GraphError",
    "CycleError",
    "DuplicateNodeError",
    "UnknownNodeError",
    "UnknownPortError",
    "UnknownLocationError",
    "DanglingPortError",
    # the ledger
    "LedgerError",
    "LedgerLockTimeoutError",
    "LedgerLockLostError",
    "LedgerSchemaError",
    "LedgerStorageError",
    "LedgerFullError",
    "LedgerUnwritableError",
    "LedgerMissingError",
    "DatabaseFileError",
    "UnregisteredPipelineError",
    "GraphChangeError",
    "ForeignLocationError",
    "FaultSpecError",
    # captures and state
    "CaptureError",
    "StreamError",
    "StateStoreError",
]

_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt)\b")


def first_line(err: BaseException) -> str:
    """The line of an error worth showing: its first, or for a Python worker's traceback
    relayed by Spark, the exception line at its end."""
    lines = [line.strip() for line in str(err).strip().splitlines() if line.strip()]
    if not lines:
        return type(err).__name__
    if len(lines) > 1 and lines[0].endswith(":"):
        found = [line for line in lines if _EXCEPTION_LINE.match(line)]
        if found:
            return found[-1][:300]
    return lines[0][:300]


class PipelineError(EpochgateError):
    """An error of a pipeline or one of its stages."""


class PipelineDefinitionError(PipelineError, ValueError):
    """A pipeline that cannot be built: unknown input, duplicate or bad name, stalling cycle,
    a bad argument of a stage (``argument`` names it)."""

    def __init__(
        self, pipeline: str, stage: str | None, reason: str, *, argument: str | None = None
    ) -> None:
        self.pipeline = pipeline
        self.stage = stage
        self.argument = argument
        self.reason = reason
        super().__init__(self.sentence())

    def sentence(self) -> str:
        """``pipeline 'p', stage 's', argument 'a': reason``."""
        where = f"pipeline {self.pipeline!r}" + (f", stage {self.stage!r}" if self.stage else "")
        if self.argument:
            where += f", argument {self.argument!r}"
        return f"{where}: {self.reason}"


class UnknownStageError(PipelineDefinitionError, UnknownNodeError):
    """A stage name the pipeline does not have, given to any call or command that takes one
    (``read``, ``lookup``, ``backfill``, ``input``, ``blockers``, ...): one sentence everywhere,
    with the closest names. It is a ``PipelineDefinitionError`` (``err.stage`` names it) and a
    ``KeyError``, as an unknown node of the progress graph is."""

    def __init__(self, pipeline: str, stage: str, known: Sequence[str]) -> None:
        self.pipeline, self.stage, self.argument = pipeline, stage, None
        self.node, self.known = stage, tuple(known)
        self.reason = no_such_stage(stage, known)
        Exception.__init__(self, self.sentence())  # the bases' own messages are not this one

    def __str__(self) -> str:
        return str(self.args[0])


class InputValidationError(PipelineError, ValueError):
    """Input data that does not fit its source: nothing of it was committed."""

    def __init__(
        self,
        stage: str,
        epoch: object,
        reason: str,
        *,
        file: str | None = None,
        column: str | None = None,
        worker: int | None = None,
        pipeline: str | None = None,
    ) -> None:
        self.stage = stage
        self.epoch = epoch
        self.file = file
        self.column = column
        self.reason = reason
        self.worker = worker
        self.pipeline = pipeline
        parts = [f"pipeline {pipeline!r}"] if pipeline else []
        parts.append(f"source {stage!r}")
        if worker is not None:
            parts.append(f"worker {worker}")
        if epoch is not None:
            parts.append(f"epoch {epoch}")
        if file:
            parts.append(f"file {file}")
        if column:
            parts.append(f"column {column!r}")
        super().__init__(f"{', '.join(parts)}: {reason}; nothing was committed")

    def of_worker(self, pipeline: str, worker: int) -> InputValidationError:
        """The same error (of the same class), naming the pipeline and the input worker whose
        data it is."""
        return type(self)(
            self.stage,
            self.epoch,
            self.reason,
            file=self.file,
            column=self.column,
            worker=worker,
            pipeline=pipeline,
        )


class InputChangedError(InputValidationError):
    """An input file (or a file of an input directory) that changed while it was being sent:
    its size or modification time moved while it was copied, or (in a directory) a file copied
    was replaced before the last was copied, or a file came or went. What was copied may mix
    two versions, so nothing was committed; send it again once its writer is done (a writer
    that writes a new single file and renames it over the old one never causes this)."""


class InvalidEpochError(PipelineError, ValueError):
    """An epoch given to a stage's run, read, revision or backfill that is not an epoch (an
    int in 0 .. ``MAX_EPOCH``); nothing was run or read."""

    def __init__(self, stage: str, epoch: object, reason: str) -> None:
        self.stage = stage
        self.epoch = epoch
        self.reason = reason
        super().__init__(
            f"stage {stage!r}: {epoch!r} is not an epoch ({reason}); nothing was run or read"
        )


class StageNotReadyError(PipelineError):
    """A stage asked to run an epoch whose input is not complete."""

    def __init__(self, stage: str, epoch: object, holds: Sequence[str]) -> None:
        self.stage = stage
        self.epoch = epoch
        self.holds = tuple(dict.fromkeys(holds))  # one per holder, not per input port
        why = "; ".join(self.holds) or "its input is not complete"
        super().__init__(f"stage {stage!r} is not ready for epoch {epoch}: {why}")


class EpochNotCompleteError(PipelineError):
    """A read of a stage's output at an epoch that is not final: more data can still arrive
    there, or a re-run is pending for it. ``blockers`` are the sentences ``status`` and
    ``blockers`` give ("source orders, worker 1, still holds epoch 3")."""

    def __init__(self, stage: str, epoch: object, blockers: Sequence[str]) -> None:
        self.stage = stage
        self.epoch = epoch
        self.blockers = tuple(dict.fromkeys(blockers))
        super().__init__(f"stage {stage!r} epoch {epoch} is not final: {'; '.join(self.blockers)}")


class ReadPendingError(StageNotReadyError):
    """A read of a partial stage as of an epoch it has not processed: it was recorded as a
    pending upquery (``keys``, as given), which an upquery run fills once the stage has
    processed ``epoch``."""

    def __init__(
        self, stage: str, epoch: object, holds: Sequence[str], keys: Sequence[object], recorded: str
    ) -> None:
        super().__init__(stage, epoch, holds)
        self.keys = tuple(keys)
        self.args = (f"{self.args[0]}; {recorded}",)


class StateReadError(PipelineError):
    """A read, eviction or question about a stage's keyed state that cannot be served (not a
    keyed stage, a key of the wrong shape or type, an eviction from a full stage). Nothing was
    read or changed. ``key`` is the key involved, when one is."""

    def __init__(self, stage: str, reason: str, *, key: object = None) -> None:
        self.stage = stage
        self.reason = reason
        self.key = key
        super().__init__(f"stage {stage!r}: {reason}")


class StageFailedError(PipelineError):
    """A stage's function or write failed; nothing of the run was committed. ``column`` and
    ``file`` name the column and the input file involved, when one is."""

    def __init__(
        self,
        stage: str,
        epoch: Time,
        cause: str,
        *,
        column: str | None = None,
        file: str | None = None,
    ) -> None:
        self.stage = stage
        self.epoch = epoch
        self.cause = cause
        self.column = column
        self.file = file
        super().__init__(f"stage {stage!r}, epoch {epoch} failed: {cause}; nothing was committed")


class ExpectationFailedError(StageFailedError):
    """A run stopped by a ``fail`` expectation: ``rows_failing`` of its ``rows_checked`` rows
    fail ``expectation``; nothing was committed."""

    def __init__(
        self, stage: str, epoch: Time, expectation: str, rows_failing: int, rows_checked: int
    ) -> None:
        super().__init__(stage, epoch, expectation_failed(expectation, rows_failing, rows_checked))
        self.expectation = expectation
        self.rows_failing = rows_failing
        self.rows_checked = rows_checked
        said = failed_expectation(stage, epoch, expectation, rows_failing, rows_checked)
        self.args = (f"{said}; nothing was committed",)


class StageWriteError(StageFailedError):
    """A stage run whose output could not be written: ``file`` is the attempt directory,
    ``reason`` why (``progress.disk.DiskFailure``: a full disk, a read-only file system). What
    the run had written was removed; nothing was committed."""

    def __init__(self, stage: str, epoch: Time, file: str, reason: DiskFailure) -> None:
        self.reason = reason
        super().__init__(stage, epoch, f"cannot write {file}: {reason.value}", file=file)


class BackfillIncompleteError(PipelineError):
    """A backfill ran every epoch it could and left some that are not ready.

    ``results`` are the runs it made (revisions, runs, stale outputs re-run); ``left`` maps
    each epoch left to the sentences that say who holds it."""

    def __init__(
        self,
        pipeline: str,
        stage: str,
        results: Sequence[RunResult],
        left: Mapping[Time, Sequence[str]],
    ) -> None:
        self.pipeline = pipeline
        self.stage = stage
        self.results = tuple(results)
        self.left = {epoch: tuple(holds) for epoch, holds in left.items()}
        lines = [
            f"pipeline {pipeline!r}: the backfill of stage {stage!r} made {len(self.results)} "
            f"stage run(s) and left {len(self.left)} epoch(s) not ready; they were not run:"
        ]
        for epoch, holds in self.left.items():
            lines.append(f"  epoch {epoch}: {'; '.join(holds) or 'its input is not complete'}")
        super().__init__("\n".join(lines))


class RunFailedError(PipelineError):
    """Stage runs of a ``Runtime.run()`` failed; every run that did not depend on them went on.

    ``failures`` holds one ``StageFailedError`` per failed stage; ``results`` the runs that
    succeeded."""

    def __init__(
        self, pipeline: str, results: Sequence[RunResult], failures: Sequence[StageFailedError]
    ) -> None:
        self.pipeline = pipeline
        self.results = tuple(results)
        self.failures = tuple(failures)
        lines = [
            f"pipeline {pipeline!r}: {len(self.failures)} stage(s) failed and were not tried "
            f"again; {len(self.results)} other stage run(s) were made:"
        ]
        lines += [f"  {failure}" for failure in self.failures]
        super().__init__("\n".join(lines))


class SinkPublishError(PipelineError):
    """A committed sink epoch that could not be published to its path (a permission, a full
    disk, its committed files gone). The commit stands; the next ``run()`` tries again."""

    def __init__(self, pipeline: str, stage: str, epoch: Time, path: Path, reason: str) -> None:
        self.pipeline = pipeline
        self.stage = stage
        self.epoch = epoch
        self.path = path
        self.reason = reason
        super().__init__(
            f"pipeline {pipeline!r}, sink {stage!r}, epoch {epoch}: cannot publish to {path}: "
            f"{reason}; the epoch is committed, and the next run() publishes it"
        )


class ClockError(PipelineError):
    """An epoch clock or close rule that cannot work, or a time it cannot place."""


class UsageError(EpochgateError):
    """A command line that names something that does not exist."""


class PipelineChoiceError(EpochgateError):
    """A command that cannot tell which pipeline it is about: none or several are registered
    and no ``-p`` says which, or ``-p`` names nothing registered or loadable."""

    def __init__(
        self, given: str | None, ledger: Path, registered: Sequence[str], reason: str
    ) -> None:
        self.given = given
        self.ledger = ledger
        self.registered = tuple(registered)
        self.reason = reason
        super().__init__(reason)


class PipelineReferenceError(EpochgateError):
    """A reference that loads no pipeline: not an example, a module or attribute that cannot
    be imported, or something that is not a Pipeline."""

    def __init__(self, reference: str, reason: str) -> None:
        self.reference = reference
        self.reason = reason
        super().__init__(f"cannot load pipeline {reference!r}: {reason}")


class ConnectServerError(EpochgateError):
    """A Spark Connect server that could not be started, reached or stopped."""

    def __init__(self, port: int, reason: str, *, log: Path | None = None) -> None:
        self.port = port
        self.reason = reason
        self.log = log
        where = f"; its log is {log}" if log else ""
        super().__init__(f"Spark Connect server on port {port}: {reason}{where}")


class SailServerError(ConnectServerError):
    """A Sail server (which serves Spark Connect) that could not be started, reached or stopped."""

    def __init__(self, port: int, reason: str, *, log: Path | None = None) -> None:
        super().__init__(port, reason, log=log)
        where = f"; its log is {log}" if log else ""
        self.args = (f"Sail server on port {port}: {reason}{where}",)


class SparkUnavailableError(EpochgateError):
    """A Spark session that cannot be had: no server at a Connect URL, or no Connect client."""

    def __init__(self, url: str, reason: str) -> None:
        self.url = url
        self.reason = reason
        super().__init__(f"cannot use Spark at {url}: {reason}")
