"""Replayed sources in the ledger: each captured stream's position, moved with what it feeds.

A worker of a replayed source is an input worker (``progress.ledger.inputs``) whose actions
come from captured events. Each event commits one batch under the key
``replay:<node>:<stream>:<index>`` and moves the stream's ``next_index`` (table ``replays``) in
the same transaction, so a replay stopped at any point resumes at the next event, never
repeating or skipping one; an event another process fed first is passed over. A message is
sent at its own time (at or after the worker's capability); a progress event moves the
capability to what the caller's ``Capability`` says the worker's streams now hold (sealing the
epochs it passes with no message, as ``advance`` with seal does), or closes it when they are
all done; a revision replaces the messages this stream fed at its time, and only those (other
streams on the same worker keep theirs).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from progress.errors import LedgerError
from progress.handles import InputHandle
from progress.ledger import inputs
from progress.ledger.records import MessageEntry, Origin, OriginKind
from progress.ledger.sessions import Session
from progress.timestamp import Time, time_to_columns

Capability = Callable[[Mapping[str, int]], Time | None]
"""Where a worker's capability stands once its streams have been fed up to these positions
(stream id -> next index; a stream not fed yet is at 0); ``None``: every stream is done."""


@dataclass(frozen=True)
class Send:
    """A captured message: ``message`` at its own time (no path: an empty message)."""

    message: MessageEntry


@dataclass(frozen=True)
class Progressed:
    """A captured progress event: the worker's capability follows its streams."""


@dataclass(frozen=True)
class Revise:
    """A captured revision: the stream's messages at the time of ``message`` replaced by it."""

    message: MessageEntry


Step = Send | Progressed | Revise


@dataclass(frozen=True)
class Place:
    """Where a captured stream is fed: worker ``worker`` of replayed source ``node``;
    ``stream`` is the capture's id, ``directory`` where it was read."""

    node: str
    worker: int
    stream: str
    directory: str


@dataclass(frozen=True)
class Feed:
    """Event ``index`` of a stream and what it does."""

    index: int
    step: Step


def replay_key(node: str, stream: str, index: int) -> str:
    """The key of the batch that feeds event ``index`` of ``stream`` into ``node``.

    >>> replay_key("payments", "3fa1", 7)
    'replay:payments:3fa1:7'
    """
    return f"replay:{node}:{stream}:{index}"


def positions(s: Session, pipeline: str, node: str) -> dict[str, int]:
    """The next index to feed of each stream of ``node`` fed so far (by stream id)."""
    rows = s.rows(
        "SELECT stream, next_index FROM replays WHERE pipeline = ? AND node = ?",
        [pipeline, node],
    )
    return {stream: int(n) for stream, n in rows}


def feed(
    s: Session, pipeline: str, place: Place, feeds: Sequence[Feed], capability: Capability
) -> int:
    """Feed consecutive events of one stream into worker ``worker`` of ``node``, one batch
    each, and move the stream's position past them, in the caller's transaction. Events
    before the position are passed over (fed already); one after it raises. Returns how many
    were fed."""
    node, worker, stream, directory = place.node, place.worker, place.stream, place.directory
    row = s.row(
        "SELECT worker, next_index FROM replays WHERE pipeline = ? AND node = ? AND stream = ?",
        [pipeline, node, stream],
    )
    if row is None:
        s.con.execute(
            "INSERT INTO replays VALUES (?, ?, ?, ?, ?, 0)",
            [pipeline, node, stream, directory, worker],
        )
        at = 0
    elif row[0] != worker:
        raise LedgerError(
            f"pipeline {pipeline!r}, source {node!r}: captured stream {stream!r} ({directory}) "
            f"was fed to worker {row[0]}, and now goes to worker {worker}: a replayed source "
            "keeps its streams' order and workers; nothing was committed"
        )
    else:
        at = int(row[1])
    where = positions(s, pipeline, node)
    fed = 0
    for f in feeds:
        if f.index < at:
            continue
        if f.index > at:
            raise LedgerError(
                f"pipeline {pipeline!r}, source {node!r}: captured stream {stream!r} "
                f"({directory}) is at event {at}, not {f.index}; nothing was committed"
            )
        where[stream] = at + 1
        action = _action(pipeline, place, f, capability(where))
        inputs.act(s, pipeline, node, worker, action)  # one by one: a revision replaces
        at += 1
        fed += 1
    s.con.execute(
        "UPDATE replays SET next_index = ?, directory = ? "
        "WHERE pipeline = ? AND node = ? AND stream = ?",
        [at, directory, pipeline, node, stream],
    )
    return fed


def _action(pipeline: str, place: Place, f: Feed, to: Time | None) -> inputs.Action:
    node, worker, stream = place.node, place.worker, place.stream
    key = replay_key(node, stream, f.index)
    step = f.step

    def effect(handle: InputHandle, s: Session) -> inputs.InputEffect:
        if isinstance(step, Send):
            m = step.message
            s.cache.arrivals.pop((pipeline, node, worker), None)
            return (
                handle.send(m.port, at=m.time),
                [m],
                Origin(OriginKind.SEND, node, worker, m.time),
            )
        if isinstance(step, Revise):
            m = step.message
            _replace(s, pipeline, node, stream, m)
            return [], [m], Origin.correction(node, worker, m.time)
        if to is None:
            return handle.close(), [], Origin.input(node, worker)
        advance = inputs.advance(pipeline, node, worker, to, seal=True, remember=False)
        return advance.effect(handle, s)

    return inputs.Action(lambda handle: key, effect)


def _replace(s: Session, pipeline: str, node: str, stream: str, m: MessageEntry) -> None:
    """Make the current messages that ``stream`` fed at ``m``'s time old."""
    t0, t1 = time_to_columns(m.time)
    s.cache.replaced[pipeline] = True
    s.cache.changed(pipeline, node, m.port, (t0, t1))
    s.con.execute(
        "UPDATE messages SET current = false WHERE pipeline = ? AND stage = ? AND port = ? "
        "AND t0 = ? AND t1 = ? AND current AND batch_id IN (SELECT batch_id FROM batches "
        "WHERE pipeline = ? AND node = ? AND starts_with(key, ?))",
        [pipeline, node, m.port, t0, t1, pipeline, node, f"replay:{node}:{stream}:"],
    )
