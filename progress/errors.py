"""The exceptions of epochgate: one root, and narrow subclasses that carry structured fields."""

from __future__ import annotations

from collections.abc import Sequence


class EpochgateError(Exception):
    """Root of every error epochgate raises on purpose."""


class ProgressError(EpochgateError):
    """An error of progress tracking: times, summaries, graphs, trackers and handles."""


class InvalidTimeError(ProgressError, ValueError):
    """A value that is not a valid time where one was expected."""

    def __init__(self, time: object, reason: str) -> None:
        self.time = time
        self.reason = reason
        super().__init__(f"invalid time {time!r}: {reason}")


class InvalidSummaryError(ProgressError, ValueError):
    """A path summary that is malformed (a negative delay, a wrong shape)."""

    def __init__(self, summary: object, reason: str) -> None:
        self.summary = summary
        self.reason = reason
        super().__init__(f"invalid path summary {summary!r}: {reason}")


class GraphError(ProgressError):
    """A dataflow graph that cannot be built."""


class DuplicateNodeError(GraphError):
    """Two nodes with one name."""

    def __init__(self, node: str) -> None:
        self.node = node
        super().__init__(f"node {node!r} is added twice; node names must be unique")


class UnknownNodeError(GraphError, KeyError):
    """A reference to a node that was never added."""

    def __init__(self, node: str, known: Sequence[str]) -> None:
        self.node = node
        self.known = tuple(known)
        super().__init__(f"unknown node {node!r}; known nodes: {', '.join(self.known) or '(none)'}")

    def __str__(self) -> str:
        return str(self.args[0])


class UnknownPortError(GraphError):
    """A port number outside a node's declared ports."""

    def __init__(self, location: object, ports: int) -> None:
        self.location = location
        self.ports = ports
        super().__init__(f"{location} does not exist: the node declares {ports} such port(s)")


class DanglingPortError(GraphError):
    """An input port with no incoming edge: nothing could ever arrive there."""

    def __init__(self, location: object) -> None:
        self.location = location
        super().__init__(
            f"{location} has no incoming edge; connect it or declare fewer inputs on the node"
        )


class CycleError(GraphError):
    """A cycle along which time does not strictly advance.

    ``cycle`` lists the node names along the cycle, first and last equal.
    """

    def __init__(self, cycle: Sequence[str]) -> None:
        self.cycle = tuple(cycle)
        super().__init__(
            f"cycle {' -> '.join(self.cycle)} does not strictly advance time; "
            "add a delay (e.g. Delay(1) or ProductSummary(0, 1)) on one of its paths"
        )


class UnknownLocationError(ProgressError, KeyError):
    """A progress update for a location that is not in the graph."""

    def __init__(self, location: object) -> None:
        self.location = location
        super().__init__(f"{location} is not a location of this graph")

    def __str__(self) -> str:
        return str(self.args[0])


class HandleError(ProgressError):
    """A misuse of an input handle."""


class WorkerError(HandleError):
    """An action an input worker may not take. Names the pipeline (when the handle knows it),
    the input node (a pipeline's source) and the worker; says that nothing was committed."""

    def __init__(self, pipeline: str | None, node: str, worker: int, text: str) -> None:
        self.pipeline = pipeline
        self.node = node
        self.worker = worker
        where = f"pipeline {pipeline!r}, " if pipeline else ""
        # Exception's own constructor: a subclass may also derive from an error whose
        # constructor takes other arguments (InvalidTimeError).
        Exception.__init__(
            self, f"{where}source {node!r}, worker {worker}{text}; nothing was committed"
        )

    @property
    def source(self) -> str:
        """The input node whose worker acted: a pipeline's source."""
        return self.node


def _at(time: object) -> str:
    """Where a worker stands, in words: ``at epoch 5``, or ``closed``."""
    return "closed" if time is None else f"at epoch {time}"


class WorkerTimeError(WorkerError):
    """An input worker at ``current`` asked to act at ``requested``, which it may not."""

    def __init__(
        self,
        node: str,
        worker: int,
        current: object,
        requested: object,
        text: str,
        *,
        pipeline: str | None = None,
    ) -> None:
        self.current = current
        self.requested = requested
        super().__init__(pipeline, node, worker, f", {_at(current)}: {text}")


class WorkerRuleError(WorkerTimeError):
    """A ``WorkerTimeError`` whose sentence follows from the two times alone (``said``)."""

    def __init__(
        self,
        node: str,
        worker: int,
        current: object,
        requested: object,
        *,
        pipeline: str | None = None,
    ) -> None:
        text = self.said(current, requested)
        super().__init__(node, worker, current, requested, text, pipeline=pipeline)

    @staticmethod
    def said(current: object, requested: object) -> str:
        raise NotImplementedError


class TimeRegressionError(WorkerRuleError):
    """An input handle asked to move its capability below the time it is at (moving to the
    time it is at does nothing)."""

    @staticmethod
    def said(current: object, requested: object) -> str:
        return (
            f"cannot advance to epoch {requested}; epochs only move forward "
            "(advancing to the epoch it is at does nothing)"
        )


class InvalidInputTimeError(WorkerTimeError, InvalidTimeError):
    """An input handle given a value that is not a time of its graph (``"3"``, ``-1``)."""

    def __init__(
        self,
        node: str,
        worker: int,
        current: object,
        requested: object,
        reason: str,
        *,
        pipeline: str | None = None,
    ) -> None:
        self.time = requested
        self.reason = reason
        text = f"{requested!r} is not an epoch ({reason})"
        super().__init__(node, worker, current, requested, text, pipeline=pipeline)


class ClosedHandleError(WorkerError):
    """An action on an input handle after ``close()`` (closing again is not one: it does
    nothing)."""

    def __init__(
        self,
        node: str,
        worker: int,
        action: str,
        *,
        pipeline: str | None = None,
        requested: object = None,
    ) -> None:
        self.action = action
        self.requested = requested
        what = action if requested is None else f"{action} to epoch {requested}"
        super().__init__(pipeline, node, worker, f": cannot {what} after close()")


class WorkerMovedError(WorkerError):
    """Data checked for the epoch an input worker was at, which the worker left before the data
    was committed (another process advanced or closed it meanwhile)."""

    def __init__(
        self, pipeline: str, node: str, worker: int, checked: object, current: object
    ) -> None:
        self.checked = checked
        self.current = current
        super().__init__(
            pipeline,
            node,
            worker,
            f": the data was checked for epoch {checked}, but the worker is {_at(current)} now "
            "(another process moved it)",
        )


class EpochNotReachedError(WorkerRuleError):
    """A correction for an epoch the input worker has not reached yet."""

    @staticmethod
    def said(current: object, requested: object) -> str:
        return (
            f"cannot correct epoch {requested}, which it has not reached; "
            "send() data for the epoch it is at"
        )


class NothingToCorrectError(WorkerRuleError):
    """A correction at an epoch the input worker has passed (or any, once closed) where it has
    no message: it closed before it sent there, or passed the epoch without sealing it. A
    correction replaces what the worker sent, and the outputs that read it are re-run; data at
    an epoch where the worker sent nothing would reach no output, so it is refused."""

    @staticmethod
    def said(current: object, requested: object) -> str:
        why = "closed before it sent there" if current is None else "passed it without sending"
        return (
            f"cannot correct epoch {requested}, where it sent nothing (it {why}): a correction "
            "replaces what the worker sent, and adding data at an epoch where it sent none is "
            "not supported yet"
        )


class LedgerError(ProgressError):
    """An error of the durable progress ledger."""


class LedgerLockTimeoutError(LedgerError, TimeoutError):
    """Another process held the ledger longer than this one was willing to wait."""

    def __init__(self, path: str, waited: float, holder_pid: int | None) -> None:
        self.path = path
        self.waited = waited
        self.holder_pid = holder_pid
        holder = f"process {holder_pid}" if holder_pid else "another process"
        super().__init__(
            f"ledger {path}: {holder} has held it for over {waited:.1f}s; "
            "raise the lock timeout or look at what that process is doing"
        )


class DatabaseFileError(LedgerError):
    """A ledger or state file that DuckDB cannot open: not a database (corrupt, truncated,
    some other file), a directory, or unreadable. ``path`` names it, ``reason`` is DuckDB's
    sentence; nothing was read or committed."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(
            f"database file {path} cannot be opened: {reason}; nothing was read or committed"
        )


class LedgerSchemaError(LedgerError):
    """A ledger file written by a schema this version of epochgate does not know."""

    def __init__(self, path: str, found: int, supported: int) -> None:
        self.path = path
        self.found = found
        self.supported = supported
        super().__init__(
            f"ledger {path} has schema version {found}, but this epochgate supports up to "
            f"{supported}; upgrade epochgate to open it"
        )


class UnregisteredPipelineError(LedgerError, KeyError):
    """A pipeline name the ledger has no graph for."""

    def __init__(self, pipeline: str, known: Sequence[str]) -> None:
        self.pipeline = pipeline
        self.known = tuple(known)
        super().__init__(
            f"pipeline {pipeline!r} is not registered in the ledger; "
            f"registered: {', '.join(self.known) or '(none)'}"
        )

    def __str__(self) -> str:
        return str(self.args[0])


class GraphChangeError(LedgerError):
    """A re-registered graph that changes more than adding stages."""

    def __init__(self, pipeline: str, differences: Sequence[str]) -> None:
        self.pipeline = pipeline
        self.differences = tuple(differences)
        super().__init__(
            f"pipeline {pipeline!r}: the new graph changes the registered one; only adding "
            f"stages is accepted. Differences: {'; '.join(self.differences)}"
        )


class ForeignLocationError(LedgerError):
    """A progress update for a location outside the pipeline's registered graph."""

    def __init__(self, pipeline: str, location: object, key: str) -> None:
        self.pipeline = pipeline
        self.location = location
        self.key = key
        super().__init__(
            f"pipeline {pipeline!r}, batch {key!r}: {location} is not a location of the "
            "registered graph; nothing was committed"
        )


class StateStoreError(EpochgateError):
    """A state store request that cannot be served."""


class CaptureError(LedgerError):
    """A capture that cannot start, stop or be found: names the pipeline, the stage (when
    known) and the capture directory."""

    def __init__(
        self, pipeline: str, directory: str, text: str, *, stage: str | None = None
    ) -> None:
        self.pipeline = pipeline
        self.directory = directory
        self.stage = stage
        where = f"pipeline {pipeline!r}" + (f", stage {stage!r}" if stage else "")
        super().__init__(f"{where}, capture {directory}: {text}")


class FaultSpecError(EpochgateError, ValueError):
    """An ``EPOCHGATE_FAULT`` setting that names no fault point or a count below 1."""

    def __init__(self, value: str, reason: str) -> None:
        self.value = value
        self.reason = reason
        super().__init__(f"EPOCHGATE_FAULT={value!r}: {reason}; no fault point was armed")


class LedgerStorageError(LedgerError):
    """The ledger file or its lock file (or the state store's file beside it) cannot be used:
    its disk is full, it cannot be written, it is gone. ``path`` is that file; ``pipeline``,
    ``stage`` and ``epoch`` name the run it stopped, when one did (``during``). Nothing of the
    transaction it stopped was committed."""

    reason = "it cannot be used"

    def __init__(
        self,
        path: str,
        *,
        label: str = "ledger",
        reason: str | None = None,
        pipeline: str | None = None,
        stage: str | None = None,
        epoch: object = None,
    ) -> None:
        self.path = path
        self.label = label
        self.reason = reason or type(self).reason
        self.pipeline = pipeline
        self.stage = stage
        self.epoch = epoch
        parts = [f"pipeline {pipeline!r}"] if pipeline else []
        if stage is not None:
            parts.append(f"stage {stage!r}")
        if epoch is not None:
            parts.append(f"epoch {epoch}")
        where = f"{', '.join(parts)}: " if parts else ""
        super().__init__(f"{where}{label} {path}: {self.reason}; nothing was committed")

    def during(self, pipeline: str, stage: str, epoch: object) -> LedgerStorageError:
        """The same error, naming the run it stopped (unchanged if it names one already)."""
        if self.stage is not None:
            return self
        return type(self)(
            self.path,
            label=self.label,
            reason=self.reason,
            pipeline=pipeline,
            stage=stage,
            epoch=epoch,
        )


class LedgerFullError(LedgerStorageError):
    """The file system of the ledger (or its lock file) has no space left."""

    reason = "no space left on the device"


class LedgerUnwritableError(LedgerStorageError):
    """The ledger file or its lock file cannot be written: a read-only file system, an
    immutable file (``chattr +i``), no permission."""

    reason = "it cannot be written (a read-only file system, an immutable file, no permission)"


class LedgerMissingError(LedgerStorageError):
    """The ledger file this process has opened before is gone (deleted, moved or replaced). It
    is not created again: an empty ledger in its place would forget every committed epoch."""

    reason = (
        "the file is gone (deleted, moved or replaced) since this process opened it; it is not "
        "created again (an empty ledger would forget what was committed): restore it"
    )


class LedgerLockLostError(LedgerStorageError):
    """The ledger's lock file was deleted or replaced while this process held it: another
    process may lock the new one, so this process's transaction was rolled back."""

    reason = (
        "the lock file was deleted or replaced while this process held it (another process "
        "may lock the new one), so the transaction was rolled back"
    )
