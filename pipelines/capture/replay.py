"""Feeding a pipeline's replayed sources from their captures (``Runtime.replay()``).

For each replayed source, every capture is read and checked whole first (checksums, indexes,
version, the replay protocol; ``pipelines.capture.log.read``), then the data files of every
event not fed yet (size, SHA-256, columns): one refused stream stops the call before anything
is committed. Then each stream is fed from the position the ledger keeps for it, a group of
events per ledger transaction (``progress.ledger.replays``): a message's files are hard-linked
(else copied) into a fresh attempt directory and committed at the message's time; a progress
event moves the worker's capability to the least frontier of its streams; a revision replaces
the stream's messages at its time. A worker with no stream closes at once.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pipelines.capture.log import Log, check_files, read
from pipelines.errors import InputValidationError, PipelineError
from pipelines.run.file_inputs import check_file
from pipelines.run.storage import new_attempt
from pipelines.stages.replayed import ReplayStage
from progress import faults
from progress.capture import (
    Messages,
    Progress,
    Revision,
    Rule,
    StreamError,
    least_frontier,
)
from progress.faults import FaultPoint
from progress.ledger import MessageEntry
from progress.ledger.replays import Feed, Place, Progressed, Revise, Send, Step

if TYPE_CHECKING:
    from pipelines.run.inputs import Bound

GROUP = 64
"""Events of one stream fed in one ledger transaction (each still its own batch)."""


def replay(runtime: Bound) -> int:
    """Feed every replayed source of the runtime's pipeline what its captures hold now;
    returns the number of events fed."""
    return sum(_replay_source(runtime, stage) for stage in runtime.pipeline.replayed_sources())


@dataclass(frozen=True)
class _Stream:
    """One capture of a source, read and checked, with where its feeding stands."""

    index: int
    log: Log
    start: int
    frontiers: tuple[int | None, ...]
    """The least time of the stream's frontier after each prefix of its events (None: done;
    ``Log.frontiers``)."""

    @property
    def id(self) -> str:
        return self.log.header.stream


def _replay_source(rt: Bound, stage: ReplayStage) -> int:
    p = rt.pipeline.name
    at = rt.ledger.replay_positions(p, stage.name)
    streams = [_checked(rt, stage, i, at) for i in range(len(stage.directories))]
    for worker in range(stage.workers):  # after the checks: a refused call commits nothing
        if (
            not stage.streams_of(worker)
            and rt.ledger.worker_time(p, stage.name, worker) is not None
        ):
            rt.ledger.close(p, stage.name, worker)
    by_id = {s.id: s for s in streams}
    fed = 0
    for stream in streams:
        worker = stage.worker_of(stream.index)
        mine = [streams[i].id for i in stage.streams_of(worker)]

        def capability(where: Mapping[str, int], mine: list[str] = mine) -> int | None:
            return _capability(by_id, mine, where)

        place = Place(stage.name, worker, stream.id, str(stream.log.directory))
        events = stream.log.events
        for first in range(stream.start, len(events), GROUP):
            made: list[Path] = []
            try:
                feeds = [
                    Feed(i, _step(rt, stage, stream, i, made))
                    for i in range(first, min(first + GROUP, len(events)))
                ]
                faults.reach(FaultPoint.REPLAY_STEP)
                fed += rt.ledger.feed_replay(p, place, feeds, capability)
            except BaseException:
                for path in made:
                    shutil.rmtree(path, ignore_errors=True)
                raise
    return fed


def _checked(rt: Bound, stage: ReplayStage, index: int, at: Mapping[str, int]) -> _Stream:
    """Stream ``index`` of ``stage``, read and checked whole, and the data of every event
    not fed yet; raises ``StreamError`` (or ``InputValidationError`` for data whose columns
    do not fit) before anything is fed."""
    directory = stage.directories[index]
    log = read(directory)
    if log.header.stream != stage.streams[index]:
        raise StreamError(
            directory,
            None,
            Rule.FOREIGN,
            f"it now holds captured stream {log.header.stream!r}, not {stage.streams[index]!r} "
            "that the pipeline was defined with",
        )
    start = at.get(log.header.stream, 0)
    if start > len(log.events):
        raise StreamError(
            directory,
            len(log.events),
            Rule.TRUNCATED,
            f"{start} events of it were fed already, and the log holds {len(log.events)}",
        )
    for i in range(start, len(log.events)):
        event = log.events[i]
        check_files(log.directory, i, event)
        if not isinstance(event, Progress):
            for f in event.files:
                path = log.directory / f.path
                _check_columns(rt, stage, stage.worker_of(index), event.time, path)
    return _Stream(index, log, start, log.frontiers)


def _check_columns(rt: Bound, stage: ReplayStage, worker: int, time: int, path: Path) -> None:
    """Raise ``InputValidationError`` naming the file and column unless its columns fit."""
    try:
        check_file(stage.name, time, path, stage.schema, ())
    except InputValidationError as err:
        raise err.of_worker(rt.pipeline.name, worker) from err.__cause__


def _capability(
    streams: Mapping[str, _Stream], mine: Sequence[str], where: Mapping[str, int]
) -> int | None:
    """The least frontier of a worker's streams at the positions ``where``."""
    times = []
    for sid in mine:
        stream = streams[sid]
        position = where.get(sid, 0)
        if position >= len(stream.frontiers):
            raise PipelineError(
                f"captured stream {sid!r} ({stream.log.directory}) was fed up to event "
                f"{position} by another process since this one read it; replay again"
            )
        frontier = stream.frontiers[position]
        times.append(() if frontier is None else (frontier,))
    least = least_frontier(times).elements
    return least[0] if least else None


def _step(rt: Bound, stage: ReplayStage, stream: _Stream, index: int, made: list[Path]) -> Step:
    """What event ``index`` of ``stream`` does, its data linked into a fresh attempt directory
    (added to ``made``; none for an empty message)."""
    event = stream.log.events[index]
    if isinstance(event, Progress):
        return Progressed()
    message = _message(rt, stage, stream.id, index, event)
    if message.path is not None:
        made.append(Path(message.path))
    return Send(message) if isinstance(event, Messages) else Revise(message)


def _message(
    rt: Bound, stage: ReplayStage, stream: str, index: int, event: Messages | Revision
) -> MessageEntry:
    time = event.time
    if not event.files:
        return MessageEntry(stage.name, 0, time, f"empty:{stage.name}:{stream}:{index}")
    attempt = new_attempt()
    path = rt.store.attempt_dir(rt.pipeline.name, stage.name, 0, time, attempt)
    path.mkdir(parents=True)
    directory = Path(stage.directories[stage.streams.index(stream)])
    try:
        for n, f in enumerate(event.files):
            source, target = directory / f.path, path / f"part-{n:05d}.parquet"
            try:
                os.link(source, target)
            except OSError:  # another file system, or links not allowed: copy once
                shutil.copyfile(source, target)
    except BaseException:
        shutil.rmtree(path, ignore_errors=True)
        raise
    rows = sum(f.rows for f in event.files)
    size = sum(f.bytes for f in event.files)
    return MessageEntry(stage.name, 0, time, attempt, str(path), rows, size)
