"""Capture: a stage's output stream written into a capture directory as the ledger commits it.

A sync brings one capture's event log up to the ledger. Holding the directory's writer lock, it
reads what the log holds (its frontier, the epochs it has messages at, the last ledger batch
behind an event), reads the stream from the ledger in one session, plans the events the log
lacks, links their data files into ``DIR/data`` and appends them. Everything comes from what
the ledger has committed, so an event never describes uncommitted work; the plan is made from
the log as it is, so a sync killed anywhere is repaired by the next one, without an event lost
or doubled.

The events a sync plans, in order:

* a log with no ``Progress`` yet gets the stream's history: from ``from_epoch`` (default: the
  stream's frontier when the capture started, which the record keeps, so every epoch it
  records is whole), each released epoch as ``Messages(e)`` (its current data) and a
  ``Progress`` past it, then the messages already committed at open epochs, then a
  ``Progress`` to the frontier;
* otherwise each message committed since (a message of the history's snapshot that it did
  not record was before the log's first epoch, and stays out), as ``Messages`` (one per batch
  and epoch), then one ``Progress`` from the log's frontier to the stream's (old elements -1,
  new +1), then one ``Revision`` per epoch revised (a stage's revision, a source worker's
  correction) with its current data, once the log has released that epoch (a correction at an
  epoch still open waits for the release).

Each ``Progress`` carries the last ledger batch of the snapshot it was made from, each
``Messages`` and ``Revision`` the batch that committed its data. Every sync's events are
checked against the replay protocol before anything is appended.

A commit that writes batches of a pipeline with a capture not stopped makes the committing
process sync that pipeline's captures soon after, once the ledger is free again
(``pipelines.capture.follower``); a failed sync is logged and the capture stays behind until
the next one. A sync reads further only the captures whose stream has moved: a message
catalogued after the log's last event, or a frontier other than the log's.
"""

from __future__ import annotations

import copy
import logging
import os
import shutil
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.parquet as pq

from pipelines.capture import log as capture_log
from pipelines.spark.footers import parts
from progress import Tracker
from progress.capture import DataFile, Event, Messages, Progress, Revision, StreamChecker
from progress.errors import EpochgateError
from progress.ledger import CaptureRecord, Ledger, StreamHead, StreamMessage, StreamSnapshot

log = logging.getLogger("epochgate.capture")


# -- what the log holds ------------------------------------------------------------------------


@dataclass
class LogState:
    """What a capture's log holds, as a sync needs it (kept up to date by the sync itself)."""

    length: int
    checker: StreamChecker
    last_batch: int | None = None
    floor: int | None = None
    """The batch of the log's first ``Progress`` (None: its history is not written yet)."""
    pairs: set[tuple[int, int]] = field(default_factory=set)
    """``(batch, epoch)`` of its ``Messages``."""
    sent: dict[int, int] = field(default_factory=dict)
    """Per epoch with ``Messages``, the last batch behind them."""
    revised: dict[int, int] = field(default_factory=dict)
    """Per epoch with a ``Revision``, the last batch behind one."""
    rows: int = 0
    bytes: int = 0
    sent_at: int | None = None
    """The greatest epoch with ``Messages``."""
    complete: bool = False
    """Whether a sync of this process has planned this log in full since it was read: only
    then does a stream that has not moved mean it lacks nothing (a log read from disk may have
    lost the tail of a write that a kill cut short)."""

    @property
    def frontier(self) -> tuple[int, ...]:
        return tuple(self.checker.frontier.elements)

    @property
    def after(self) -> int | None:
        """The batch after which the stream may hold messages the log lacks (None: the log
        has no history yet)."""
        return self.last_batch if self.last_batch is not None else self.floor

    @staticmethod
    def of(found: capture_log.Log) -> LogState:
        state = LogState(0, StreamChecker(str(found.directory), found.header.minimum))
        state.add(found.events, found.batches)
        return state

    def add(self, events: Sequence[Event], batches: Sequence[int | None]) -> None:
        """Take in ``events`` (appended after those held), checking the protocol."""
        for event, batch in zip(events, batches, strict=True):
            self.checker.check(event)
            self.length += 1
            if batch is not None:
                self.last_batch = batch if self.last_batch is None else max(self.last_batch, batch)
            if isinstance(event, Progress):
                if self.floor is None:
                    self.floor = batch if batch is not None else 0
                continue
            self.rows += event.rows
            self.bytes += sum(f.bytes for f in event.files)
            of = batch if batch is not None else 0
            if isinstance(event, Messages):
                self.pairs.add((of, event.time))
                self.sent[event.time] = max(self.sent.get(event.time, of), of)
                self.sent_at = event.time if self.sent_at is None else max(self.sent_at, event.time)
            else:
                self.revised[event.time] = max(self.revised.get(event.time, of), of)

    def released(self, time: int, frontier: Sequence[int] | None = None) -> bool:
        """Whether ``time`` is below every element of ``frontier`` (default: the log's)."""
        elements = self.frontier if frontier is None else frontier
        return all(time < f for f in elements)


_cache: dict[str, tuple[tuple[int, int, int], LogState]] = {}
"""Per capture directory, the state of the log this process last read or wrote, by the log
file's (inode, size, mtime): another writer's append makes it read the log again."""


def _stat(directory: Path) -> tuple[int, int, int]:
    st = (directory / capture_log.LOG).stat()
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def log_state(directory: Path) -> LogState:
    """The state of the log in ``directory`` (read again only when the file changed)."""
    key = str(directory)
    found = _cache.get(key)
    stat = _stat(directory)
    if found is not None and found[0] == stat:
        return found[1]
    state = LogState.of(capture_log.read(directory))
    _cache[key] = (stat, state)
    return state


# -- planning ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Planned:
    """An event to append: ``Messages`` or ``Revision`` of ``messages`` at ``time``, or a
    ``Progress`` of ``changes``; ``batch`` is the ledger batch behind it."""

    kind: type[Messages] | type[Revision] | type[Progress]
    batch: int
    time: int = 0
    messages: tuple[StreamMessage, ...] = ()
    changes: tuple[tuple[int, int], ...] = ()


def moved(old: Sequence[int], new: Sequence[int]) -> tuple[tuple[int, int], ...]:
    """The changes that move counts of 1 at ``old`` to counts of 1 at ``new``.

    >>> moved([3], [5])
    ((3, -1), (5, 1))
    >>> moved([3], [])
    ((3, -1),)
    """
    return tuple([(t, -1) for t in old if t not in new] + [(t, 1) for t in new if t not in old])


def _by_time(messages: Sequence[StreamMessage]) -> dict[int, list[StreamMessage]]:
    out: dict[int, list[StreamMessage]] = {}
    for m in messages:
        out.setdefault(m.time, []).append(m)
    return out


def history(state: LogState, snap: StreamSnapshot) -> list[Planned]:
    """The events of a log without ``Progress`` yet: every epoch of ``snap.current`` (its
    current messages from the first epoch recorded on), released ones each followed by a
    ``Progress`` past it, then those at open epochs, then a ``Progress`` to the frontier
    (made even when it moves nothing: it marks where the history ends)."""
    out: list[Planned] = []
    at = list(state.frontier)
    top = snap.high_water
    for time, found in sorted(_by_time(snap.current).items()):
        known = state.sent.get(time)  # a history cut short by a crash: what it holds stays
        fresh = tuple(m for m in found if known is None or m.batch > known)
        if not fresh:
            continue
        out.append(Planned(Messages, max(m.batch for m in fresh), time, fresh))
        if state.released(time, snap.frontier):
            out.append(Planned(Progress, top, changes=moved(at, [time + 1])))
            at = [time + 1]
    changes = moved(at, snap.frontier)
    if changes or not any(p.kind is Progress for p in out):
        out.append(Planned(Progress, top, changes=changes))
    return out


def revision_times(state: LogState, snap: StreamSnapshot, first_epoch: int | None) -> list[int]:
    """The epochs with a revision the log does not hold yet (their current data is needed)."""
    return sorted({t for t, b in snap.revisions if _missing(state, snap, t, b, first_epoch)})


def _missing(
    state: LogState, snap: StreamSnapshot, time: int, batch: int, first_epoch: int | None
) -> bool:
    if first_epoch is not None and time < first_epoch:
        return False
    if state.revised.get(time, -1) >= batch:
        return False
    revisions = {(t, b) for t, b in snap.revisions}
    return not any(b >= batch and (time, b) in revisions for b, t in state.pairs if t == time)


def live(
    state: LogState,
    snap: StreamSnapshot,
    current: Mapping[int, Sequence[StreamMessage]],
    first_epoch: int | None,
) -> list[Planned]:
    """The events of a log that holds its history: see the module docs. ``current`` holds
    the current messages of each epoch ``revision_times`` named."""
    out: list[Planned] = []
    groups: dict[tuple[int, int], list[StreamMessage]] = {}
    for m in snap.window:
        if m.revision or (m.batch, m.time) in state.pairs:
            continue
        if state.floor is not None and m.batch <= state.floor:
            continue  # the history's snapshot held it: recorded, or before the log's first epoch
        if first_epoch is not None and m.time < first_epoch:
            continue
        groups.setdefault((m.batch, m.time), []).append(m)
    new_times = {t for _, t in groups}
    for (batch, time), found in groups.items():
        out.append(Planned(Messages, batch, time, tuple(found)))
    last: dict[int, int] = {}
    for t, b in snap.revisions:
        if _missing(state, snap, t, b, first_epoch):
            last[t] = max(last.get(t, b), b)
    revisions: list[Planned] = []
    for time, batch in sorted(last.items(), key=lambda tb: (tb[1], tb[0])):
        data = tuple(current.get(time, ()))
        if time in state.sent or time in new_times:
            if state.released(time, snap.frontier):
                revisions.append(Planned(Revision, batch, time, data))
        elif not state.released(time):  # never sent in the log: its data is all there is
            out.append(Planned(Messages, batch, time, data))
    changes = moved(state.frontier, snap.frontier)
    if changes:
        out.append(Planned(Progress, snap.high_water, changes=changes))
    return out + revisions


def plan(
    ledger: Ledger, capture: CaptureRecord, state: LogState, tracker: Tracker | None = None
) -> list[Planned]:
    """The events ``capture``'s log lacks, from one ledger session (a snapshot); ``tracker``
    holds the counts of that session when the caller has read them already."""
    with ledger.session():
        if state.floor is None:
            snap = ledger.capture_snapshot(
                capture, after=None, floor=None, history_from=capture.from_epoch, tracker=tracker
            )
            return history(state, snap)
        snap = ledger.capture_snapshot(
            capture, after=state.after, floor=state.floor, tracker=tracker
        )
        times = revision_times(state, snap, capture.from_epoch)
        current = _by_time(ledger.capture_current(capture, times))
    return live(state, snap, current, capture.from_epoch)


# -- appending ---------------------------------------------------------------------------------


def _link(source: Path, target: Path) -> None:
    """``target`` made the same file as ``source``: a hard link, else a copy (another file
    system); under a temporary name first, so a sync killed here leaves no half file."""
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.unlink(missing_ok=True)
    try:
        os.link(source, tmp)
    except OSError:
        shutil.copyfile(source, tmp)
    os.replace(tmp, target)


def _files(directory: Path, index: int, messages: Sequence[StreamMessage]) -> tuple[DataFile, ...]:
    """The data of event ``index``: every Parquet file with rows of ``messages``, linked into
    ``DIR/data/<index>-<n>.parquet`` (an epoch with no rows has no files)."""
    out: list[DataFile] = []
    for m in messages:
        if m.path is None or not m.rows:
            continue
        for part in parts(m.path):
            rows = pq.ParquetFile(part).metadata.num_rows
            if not rows:
                continue
            name = f"{capture_log.DATA}/{index}-{len(out)}.parquet"
            target = directory / name
            _link(part, target)
            out.append(DataFile(name, rows, target.stat().st_size, capture_log.sha256(target)))
    return tuple(out)


def _shaped(planned: Planned, files: tuple[DataFile, ...] = ()) -> Event:
    if planned.kind is Progress:
        return Progress(planned.changes)
    if planned.kind is Messages:
        return Messages(planned.time, files)
    return Revision(planned.time, files)


def prepared(directory: Path) -> LogState:
    """The state of the log in ``directory``, whose lock the caller holds, after cutting a
    line torn by a writer killed inside its write."""
    length = capture_log.length(directory)
    state = log_state(directory)
    if state.length != length:  # changed within the file's time resolution: read it again
        _cache.pop(str(directory), None)
        state = log_state(directory)
    return state


def appended(directory: Path, state: LogState, planned: Sequence[Planned]) -> int:
    """Link the data of ``planned`` (all that a full plan found, or nothing for a stream that
    has not moved) and append its events to the log in ``directory`` (the caller holds its
    lock; ``state`` is what the log holds). Returns how many.

    The state read by others (``status`` in another thread) is never changed in place: the
    log's new state is a copy."""
    if not planned:
        state.complete = True
        return 0
    checker = copy.deepcopy(state.checker)
    checker.check_all([_shaped(p) for p in planned])  # a planning mistake never reaches the log
    length = state.length
    events = [_shaped(p, _files(directory, length + i, p.messages)) for i, p in enumerate(planned)]
    batches = [p.batch for p in planned]
    capture_log.append(directory, length, events, batches)
    grown = copy.deepcopy(state)
    grown.add(events, batches)
    grown.complete = True
    _cache[str(directory)] = (_stat(directory), grown)
    return len(events)


def sync_locked(ledger: Ledger, capture: CaptureRecord, directory: Path) -> int:
    """Bring the log in ``directory`` up to the ledger; the caller holds its lock. Returns
    the number of events appended."""
    state = prepared(directory)
    return appended(directory, state, plan(ledger, capture, state))


def sync(ledger: Ledger, capture: CaptureRecord) -> int:
    """Bring one capture's log up to the ledger (see the module docs); events appended."""
    directory = Path(capture.directory)
    with capture_log.locked(directory):
        return sync_locked(ledger, capture, directory)


Failed = Callable[[CaptureRecord, Exception], None]


def unchanged(state: LogState, head: StreamHead) -> bool:
    """Whether a log that holds its history has nothing to add: a sync of this process has
    planned it in full, no message of its stream was catalogued after its last event's batch
    since, and the stream's frontier is the log's (a revision waiting for its epoch's release
    waits for the frontier to move)."""
    if state.after is None or not state.complete:
        return False
    quiet = head.last_batch is None or head.last_batch <= state.after
    return quiet and head.frontier == state.frontier


def plan_if_moved(
    ledger: Ledger, capture: CaptureRecord, state: LogState, tracker: Tracker, head: StreamHead
) -> list[Planned]:
    """``plan``, or nothing without reading the stream when its head says it has not moved."""
    if unchanged(state, head):
        return []
    return plan(ledger, capture, state, tracker)


def sync_pipeline(ledger: Ledger, pipeline: str, on_error: Failed | None = None) -> int:
    """Sync every capture of ``pipeline`` that is not stopped, from one ledger session (one
    look at the counts for all of them), holding their locks (taken in path order, before the
    ledger's). A capture whose stream has no message since its log's last event and whose
    frontier has not moved is not read further. A capture that fails raises, or with
    ``on_error`` is reported there and left behind while the others go on. Returns the events
    appended."""
    records = ledger.captures(pipeline, active=True)
    if not records:
        return 0
    states: dict[str, LogState] = {}
    planned: dict[str, list[Planned]] = {}
    with ExitStack() as locks:
        for found in sorted(records, key=lambda c: c.directory):
            try:
                locks.enter_context(capture_log.locked(found.directory))
                states[found.directory] = prepared(Path(found.directory))
            except (EpochgateError, OSError) as err:
                if on_error is None:
                    raise
                on_error(found, err)
        with ledger.session():
            tracker = ledger.tracker(pipeline)
            current = ledger.captures(pipeline, active=True)  # none stopped meanwhile
            mine = [c for c in current if c.directory in states]
            after = min((states[c.directory].after or 0 for c in mine), default=0)
            heads = ledger.capture_heads(mine, after=after, tracker=tracker)
            for found in mine:
                planned[found.directory] = plan_if_moved(
                    ledger, found, states[found.directory], tracker, heads[found.directory]
                )
        total = 0
        for found in mine:
            try:
                total += appended(
                    Path(found.directory), states[found.directory], planned[found.directory]
                )
            except (EpochgateError, OSError) as err:
                if on_error is None:
                    raise
                on_error(found, err)
    return total


# -- status ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CaptureStatus:
    """Where a capture stands: its stage (and input worker), directory and stream id; the
    events its log holds, the last epoch it has released (None: none yet; ``done``: every
    epoch), the rows and bytes of its data; ``behind``, the events a sync would append now;
    whether it is stopped; and why its log cannot be read, if it cannot."""

    pipeline: str
    stage: str
    worker: int | None
    directory: str
    stream: str
    from_epoch: int | None
    events: int
    released: int | None
    done: bool
    rows: int
    bytes: int
    behind: int
    stopped: bool
    error: str | None = None

    def as_json(self) -> dict[str, object]:
        return {
            "pipeline": self.pipeline,
            "stage": self.stage,
            "worker": self.worker,
            "directory": self.directory,
            "stream": self.stream,
            "from_epoch": self.from_epoch,
            "events": self.events,
            "released": self.released,
            "done": self.done,
            "rows": self.rows,
            "bytes": self.bytes,
            "behind": self.behind,
            "stopped": self.stopped,
            "error": self.error,
        }


def status(ledger: Ledger, capture: CaptureRecord) -> CaptureStatus:
    """``capture`` as its log and the ledger hold it now (it reads, appends nothing)."""
    directory = Path(capture.directory)

    def shown(state: LogState | None, behind: int, error: str | None) -> CaptureStatus:
        frontier = state.frontier if state is not None else ()
        done = state is not None and state.floor is not None and not frontier
        if state is None or state.floor is None:
            released = None
        elif done:
            released = state.sent_at
        else:
            released = frontier[0] - 1 if frontier[0] > 0 else None
        return CaptureStatus(
            capture.pipeline,
            capture.stage,
            capture.worker,
            capture.directory,
            capture.stream,
            capture.from_epoch,
            state.length if state is not None else 0,
            released,
            done,
            state.rows if state is not None else 0,
            state.bytes if state is not None else 0,
            behind,
            not capture.active,
            error,
        )

    try:
        state = log_state(directory)
    except (EpochgateError, OSError) as err:
        return shown(None, 0, str(err))
    behind = len(plan(ledger, capture, state)) if capture.active else 0
    return shown(state, behind, None)


@contextmanager
def new_log(directory: Path, header: capture_log.Header) -> Iterator[None]:
    """Create the log in ``directory`` and hold its lock for the block; if the block fails,
    remove what was created, so a capture that did not start leaves no log behind."""
    capture_log.create(directory, header)  # under the lock, which it releases
    with capture_log.locked(directory):
        try:
            yield
        except BaseException:
            (directory / capture_log.LOG).unlink(missing_ok=True)
            shutil.rmtree(directory / capture_log.DATA, ignore_errors=True)
            _cache.pop(str(directory), None)
            raise
