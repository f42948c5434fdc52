"""Handles at the edges of a graph: `InputHandle` produces input, `Probe` watches a frontier.

An ``InputHandle`` belongs to one worker of an input node and holds that worker's capability on
the node's outputs. Each action returns the progress batch it produces and applies it nowhere,
so one worker's batches can be delivered to any number of observers (trackers, the ledger).
``input_handle`` and ``probe`` make them for a tracker.
"""

from __future__ import annotations

from progress.antichain import Antichain
from progress.errors import (
    ClosedHandleError,
    EpochNotReachedError,
    HandleError,
    InvalidInputTimeError,
    InvalidTimeError,
    TimeRegressionError,
    UnknownLocationError,
)
from progress.graph import Graph
from progress.location import Location
from progress.sentences import worker_problem
from progress.timestamp import Time, less_equal, validate_time
from progress.tracker import Tracker, Update


def input_handle(tracker: Tracker, node: str, worker: int = 0) -> InputHandle:
    """A handle for worker ``worker`` of input node ``node`` of the tracker's graph; its actions
    return batches (apply them to the tracker, or to any other observer)."""
    return InputHandle(tracker.graph, node, worker)


def probe(tracker: Tracker, location: Location) -> Probe:
    """A read-only view of ``location``'s frontier in ``tracker``; raises
    ``UnknownLocationError`` for a location outside its graph."""
    if location not in tracker.graph.index:
        raise UnknownLocationError(location)
    return Probe(tracker, location)


class InputHandle:
    """One worker's capability on an input node: ``send`` messages, ``advance_to``, ``close``.

    The rules of moving, one for every caller (the ledger resumes a handle for each action):

    - ``advance_to(t)`` at the time the handle is at does nothing (a retried advance); below
      it raises ``TimeRegressionError``, whatever times the handle passed before.
    - ``close()`` of a closed handle does nothing (a retried close); ``send`` and
      ``advance_to`` after it raise ``ClosedHandleError``.
    - ``correct(t)`` is allowed at any time the handle has reached (closed included) and moves
      nothing; a time it has not reached raises ``EpochNotReachedError``.

    Errors name the input node and the worker, and the pipeline when the handle was given one.

    >>> from progress import GraphBuilder, Source, Target
    >>> b = GraphBuilder()
    >>> b.add_node("payments", inputs=0, outputs=1)
    >>> b.add_node("validate", inputs=1, outputs=1, workers=0)
    >>> b.add_edge(Source("payments"), Target("validate"))
    >>> handle = input_handle(Tracker(b.compile()), "payments", worker=0)
    >>> handle.send()
    [(Target('validate', 0), 0, 1)]
    >>> handle.advance_to(3)
    [(Source('payments', 0), 0, -1), (Source('payments', 0), 3, 1)]
    >>> handle.advance_to(3)
    []
    >>> handle.send(at=5)
    [(Target('validate', 0), 5, 1)]
    """

    def __init__(
        self, graph: Graph, node: str, worker: int, *, pipeline: str | None = None
    ) -> None:
        spec = graph.node(node)
        if spec.inputs:
            raise HandleError(f"node {node!r} has inputs; only input nodes take input handles")
        problem = worker_problem(worker, spec.workers)
        if problem is not None:
            raise HandleError(f"input {node!r} has {spec.workers} worker(s); {problem}")
        self.node = node
        self.worker = worker
        self.pipeline = pipeline
        self._graph = graph
        self._sources = spec.sources()
        self._time: Time = graph.minimum
        self._closed = False

    @classmethod
    def resume(
        cls, graph: Graph, node: str, worker: int, time: Time | None, *, pipeline: str | None = None
    ) -> InputHandle:
        """A handle for a worker whose capability is durably at ``time`` (``None``: closed)."""
        handle = cls(graph, node, worker, pipeline=pipeline)
        if time is None:
            handle._closed = True
        else:
            handle._time = validate_time(time, graph.minimum)
        return handle

    @property
    def graph(self) -> Graph:
        return self._graph

    @property
    def time(self) -> Time:
        """The time of this worker's capability: where ``send`` puts messages."""
        return self._time

    @property
    def closed(self) -> bool:
        return self._closed

    def has_passed(self, time: Time) -> bool:
        """Whether this worker can no longer send at ``time``: it is closed, or its capability
        is not at or below ``time``."""
        return self._closed or not less_equal(self._time, time)

    def send(self, port: int = 0, *, at: object = None) -> list[Update]:
        """Announce one message on output ``port``: +1 at each target, at the current time or
        at ``at``, any time greater than or equal to it (the capability held at the current
        time holds every later time, as timely's ``session_at`` does); a time below the
        current one raises ``TimeRegressionError``. Readiness is unchanged: the capability at
        the current time keeps every later time from being ready."""
        if self._closed:
            raise ClosedHandleError(self.node, self.worker, "send", pipeline=self.pipeline)
        if not 0 <= port < len(self._sources):
            raise HandleError(f"input {self.node!r} has no output port {port}")
        time = self._time
        if at is not None:
            time = self._valid(at)
            if not less_equal(self._time, time):
                raise TimeRegressionError(
                    self.node, self.worker, self._time, time, pipeline=self.pipeline
                )
        targets = self._graph.edges.get(self._sources[port], ())
        return [(target, time, 1) for target in targets]

    def check_advance(self, time: object) -> Time:
        """Raise what ``advance_to(time)`` would raise; return ``time`` as a time."""
        if self._closed:
            raise ClosedHandleError(
                self.node, self.worker, "advance", pipeline=self.pipeline, requested=time
            )
        valid = self._valid(time)
        if not less_equal(self._time, valid):
            raise TimeRegressionError(
                self.node, self.worker, self._time, valid, pipeline=self.pipeline
            )
        return valid

    def advance_to(self, time: Time) -> list[Update]:
        """Move the capability to ``time``: -1 at the old time, +1 at the new one, per output.

        Raises ``TimeRegressionError`` for a time not greater than or equal to the current one;
        the current one itself changes nothing.
        """
        time = self.check_advance(time)
        if time == self._time:
            return []
        old, self._time = self._time, time
        batch: list[Update] = []
        for source in self._sources:
            batch.append((source, old, -1))
            batch.append((source, time, 1))
        return batch

    def close(self) -> list[Update]:
        """Drop the capability: nothing more will come from this worker. Closing a closed
        handle does nothing."""
        if self._closed:
            return []
        self._closed = True
        return [(source, self._time, -1) for source in self._sources]

    def correct(self, time: object) -> list[Update]:
        """Replace what this worker sent at ``time``, a time it has reached (or any, once
        closed). The messages it replaces were counted already and the capability stays, so
        the batch is empty. Raises ``EpochNotReachedError`` for a time it has not reached
        (``send`` data there once it is)."""
        valid = self._valid(time)
        if not self._closed and not less_equal(valid, self._time):
            raise EpochNotReachedError(
                self.node, self.worker, self._time, valid, pipeline=self.pipeline
            )
        return []

    def _valid(self, time: object) -> Time:
        """``time`` if it is a time of the graph; else ``InvalidInputTimeError``."""
        try:
            return validate_time(time, self._graph.minimum)
        except InvalidTimeError as err:
            current = None if self._closed else self._time
            raise InvalidInputTimeError(
                self.node, self.worker, current, time, err.reason, pipeline=self.pipeline
            ) from err


class Probe:
    """A read-only view of one location's frontier in a tracker."""

    def __init__(self, tracker: Tracker, location: Location) -> None:
        self._tracker = tracker
        self.location = location

    def frontier(self) -> Antichain[Time]:
        return self._tracker.frontier(self.location)

    def less_than(self, time: Time) -> bool:
        """True when a time strictly less than ``time`` may still appear at the location."""
        return self.frontier().less_than(time)

    def less_equal(self, time: Time) -> bool:
        """True when a time less than or equal to ``time`` may still appear at the location."""
        return self.frontier().less_equal(time)

    def done(self) -> bool:
        """True when nothing more will ever appear at the location."""
        return self.frontier().is_empty()
