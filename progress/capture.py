"""Captured streams: the events of timely's replay protocol and the rules a stream must keep.

A captured stream is one stage output as a reader sees it: ``Messages`` at a time, and
``Progress`` changes to the counts of the times at which messages may still come. A stream
starts with count 1 at the minimum time, as timely's capture does. Three rules keep a replay
exact (DESIGN.md, invariant 6):

* a message at ``t`` needs a positive count at some ``t' <= t``;
* a count may rise at ``t`` only if some ``t' <= t`` was positive before the event;
* a count never falls below zero.

A ``Revision`` replaces the messages of a time the stream has already released (the batch form
of a re-delivered file): it needs a message there before it and no positive count at or below
it. ``StreamChecker`` applies the rules event by event and keeps the stream's counts, so a
replay can check a whole stream before it commits any of it. Pure: no I/O here; the log that
stores these events is ``pipelines.capture.log``.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from progress.antichain import Antichain, MutableAntichain
from progress.errors import ProgressError


@dataclass(frozen=True)
class DataFile:
    """One Parquet file of a message, by its path inside the capture directory."""

    path: str
    rows: int
    bytes: int
    sha256: str


@dataclass(frozen=True)
class Messages:
    """The data of one message at ``time`` (no files: an empty message)."""

    time: int
    files: tuple[DataFile, ...] = ()

    @property
    def rows(self) -> int:
        return sum(f.rows for f in self.files)


@dataclass(frozen=True)
class Progress:
    """Changes to the counts of the times at which messages may still come."""

    changes: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class Revision:
    """The messages at ``time``, a time the stream released, replaced by these files."""

    time: int
    files: tuple[DataFile, ...] = ()

    @property
    def rows(self) -> int:
        return sum(f.rows for f in self.files)


Event = Messages | Progress | Revision


class Rule(enum.Enum):
    """Why a stream (or the log that holds it) was refused; the value is the sentence."""

    MESSAGE_WITHOUT_CAPABILITY = "a message needs a positive count at or before its time"
    COUNT_FROM_NOTHING = "a count may rise only where a count at or before it is positive"
    NEGATIVE_COUNT = "a count may not fall below zero"
    REVISION_OF_OPEN_TIME = "a revision needs a time the stream has released"
    REVISION_WITHOUT_MESSAGE = "a revision needs a message at its time before it"
    BAD_TIME = "a time is an int epoch >= the minimum"
    TRUNCATED = "the log ends inside an event"
    CORRUPT = "an event's checksum does not match its content"
    OUT_OF_ORDER = "event indexes count up from 0 without gaps"
    FOREIGN = "the log is not an epochgate capture of a version this code reads"
    DATA_MISSING = "a data file named by an event is missing or differs from its checksum"
    ESCAPING_PATH = "a data file's path is relative and stays inside the capture directory"


class StreamError(ProgressError):
    """A captured stream refused: ``stream`` (its directory or name), the ``index`` of the
    event that broke ``rule`` (None for the log as a whole), and what was found."""

    def __init__(self, stream: str, index: int | None, rule: Rule, found: str = "") -> None:
        self.stream = stream
        self.index = index
        self.rule = rule
        self.found = found
        where = f"event {index}" if index is not None else "the log"
        tail = f": {found}" if found else ""
        super().__init__(
            f"captured stream {stream!r}, {where}: {rule.value}{tail}; nothing of it was committed"
        )


class StreamChecker:
    """The counts of one stream, moved event by event; ``check`` raises ``StreamError`` for an
    event that breaks a rule and leaves the counts as they were before it."""

    def __init__(self, stream: str, minimum: int = 0) -> None:
        self.stream = stream
        self.minimum = minimum
        self.index = 0
        self._counts: MutableAntichain[int] = MutableAntichain()
        self._counts.update_iter([(minimum, 1)])
        self._sent: set[int] = set()

    @property
    def frontier(self) -> Antichain[int]:
        """The least times at which messages may still come (empty: the stream is done)."""
        return self._counts.frontier()

    def counts(self) -> list[tuple[int, int]]:
        """The positive counts, least time first."""
        return sorted(self._counts.positive())

    def check(self, event: Event) -> None:
        """Apply ``event`` (the next one of the stream) or raise ``StreamError``."""
        index = self.index
        if isinstance(event, Progress):
            self._progress(index, event.changes)
        elif isinstance(event, Messages):
            self._time(index, event.time)
            if not self._counts.less_equal(event.time):
                raise self._error(
                    index,
                    Rule.MESSAGE_WITHOUT_CAPABILITY,
                    f"a message at {event.time}, counts {self._shown()}",
                )
            self._sent.add(event.time)
        else:
            self._time(index, event.time)
            if self._counts.less_equal(event.time):
                raise self._error(
                    index,
                    Rule.REVISION_OF_OPEN_TIME,
                    f"a revision at {event.time}, counts {self._shown()}",
                )
            if event.time not in self._sent:
                raise self._error(
                    index, Rule.REVISION_WITHOUT_MESSAGE, f"a revision at {event.time}"
                )
        self.index = index + 1

    def check_all(self, events: Iterable[Event]) -> None:
        for event in events:
            self.check(event)

    def _progress(self, index: int, changes: Sequence[tuple[int, int]]) -> None:
        for time, delta in changes:
            self._time(index, time)
            if delta > 0 and not self._counts.less_equal(time):
                raise self._error(
                    index,
                    Rule.COUNT_FROM_NOTHING,
                    f"+{delta} at {time}, counts {self._shown()}",
                )
        net: dict[int, int] = {}
        for time, delta in changes:
            net[time] = net.get(time, 0) + delta
        for time, delta in sorted(net.items()):
            if self._counts.count_for(time) + delta < 0:
                raise self._error(
                    index,
                    Rule.NEGATIVE_COUNT,
                    f"{delta} at {time}, counts {self._shown()}",
                )
        self._counts.update_iter(net.items())

    def _time(self, index: int, time: object) -> None:
        if type(time) is not int or time < self.minimum:
            raise self._error(index, Rule.BAD_TIME, f"time {time!r}")

    def _shown(self) -> str:
        counts = self.counts()
        return "{" + ", ".join(f"{t}: {c}" for t, c in counts) + "}" if counts else "none"

    def _error(self, index: int, rule: Rule, found: str) -> StreamError:
        return StreamError(self.stream, index, rule, found)


def replayed_frontier(streams: Sequence[StreamChecker]) -> Antichain[int]:
    """The frontier of several streams fed into one place (see ``least_frontier``)."""
    return least_frontier(checker.frontier for checker in streams)


def least_frontier(frontiers: Iterable[Iterable[int]]) -> Antichain[int]:
    """The frontier of several streams fed into one place: the least of their frontiers (an
    epoch passes only after every stream has released it; a done stream holds nothing).

    >>> least_frontier([[4], [], [2]]).elements
    (2,)
    >>> least_frontier([[], []]).elements
    ()
    """
    out: Antichain[int] = Antichain()
    for frontier in frontiers:
        out.extend(frontier)
    return out
