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


class TimeRegressionError(HandleError):
    """An input handle asked to move its capability backwards."""

    def __init__(self, node: str, worker: int, current: object, requested: object) -> None:
        self.node = node
        self.worker = worker
        self.current = current
        self.requested = requested
        super().__init__(
            f"input {node!r}, worker {worker}: cannot advance to {requested} from {current}; "
            "times only move forward"
        )


class ClosedHandleError(HandleError):
    """An action on an input handle after ``close()``."""

    def __init__(self, node: str, worker: int, action: str) -> None:
        self.node = node
        self.worker = worker
        self.action = action
        super().__init__(f"input {node!r}, worker {worker}: cannot {action} after close()")


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
