"""Input workers in the ledger: each one's durable capability, and its send, advance, close and
correction.

Each action resumes the worker's ``InputHandle`` at its recorded time, so the handle's rules
(``progress.handles``) hold for every caller, takes the batch the handle returns, and writes it
with the worker's new capability in the caller's transaction. An action is idempotent by its
key: a retried send, advance or close returns the first commit (``repeated``). An advance finds
its key from the resumed handle, after the handle's checks: an advance to an epoch the worker
has left raises like any move backwards, even when the worker once advanced to it.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from progress.errors import LedgerError, NothingToCorrectError, WorkerMovedError
from progress.handles import InputHandle
from progress.ledger import queries
from progress.ledger.records import CommitResult, MessageEntry, Origin, OriginKind
from progress.ledger.sessions import Session
from progress.ledger.writer import Pending, committed, write_batches
from progress.timestamp import Time, time_from_columns, time_to_columns
from progress.tracker import Update

InputEffect = tuple[list[Update], list[MessageEntry], Origin]
"""What an input worker's action does: its batch, the messages it catalogs, who did it."""


@dataclass(frozen=True)
class Action:
    """An input worker's action, on its resumed handle."""

    key: Callable[[InputHandle], str]
    """Its idempotency key; the rules that hold even for a repeat are checked here."""
    effect: Callable[[InputHandle, Session], InputEffect]
    """What it does (with the open session at hand), when it is not a repeat."""
    fresh: Callable[[InputHandle], bool] = lambda handle: False
    """Whether it cannot be a repeat, seen from the resumed handle (no commit is looked for)."""


def worker_time(s: Session, pipeline: str, node: str, worker: int) -> Time | None:
    """Where an input worker's capability stands (``None`` once closed): read once per hold
    of the file, then as its actions move it (``hold_cache``)."""
    key = (pipeline, node, worker)
    if key in s.cache.workers:
        return s.cache.workers[key]
    row = s.row(
        "SELECT t0, t1 FROM capabilities WHERE pipeline = ? AND node = ? AND worker = ?",
        [pipeline, node, worker],
    )
    if row is None:
        raise LedgerError(f"pipeline {pipeline!r}: input {node!r} has no worker {worker}")
    at = s.cache.workers[key] = None if row[0] is None else time_from_columns(row[0], row[1])
    return at


def send_key(node: str, worker: int, message: MessageEntry | None, key: str | None) -> str:
    """The idempotency key of a send: the caller's, else one per message attempt."""
    attempt = message.attempt if message is not None else uuid.uuid4().hex
    return key or f"send:{node}:{worker}:{attempt}"


def send(
    pipeline: str,
    node: str,
    worker: int,
    message: MessageEntry | None,
    *,
    port: int,
    key: str,
    fresh: bool = False,
) -> Action:
    """A message from the worker at its current time, which must be the time of ``message``
    (the epoch its data was checked for): a worker that moved since raises
    ``WorkerMovedError``. ``fresh``: its key was never committed (a new attempt's)."""

    def effect(handle: InputHandle, s: Session) -> InputEffect:
        time = handle.time
        batch = handle.send(port)
        entries = []
        if message is not None:
            if message.time != time:
                raise WorkerMovedError(pipeline, node, worker, message.time, time)
            m = message
            entries.append(MessageEntry(node, port, time, m.attempt, m.path, m.rows, m.bytes))
        s.cache.arrivals[pipeline, node, worker] = (time, True)
        return batch, entries, Origin(OriginKind.SEND, node, worker, time)

    return Action(lambda handle: key, effect, fresh=lambda handle: fresh)


def advance_key(node: str, worker: int, time: Time) -> str:
    return f"advance:{node}:{worker}:{json.dumps(time_to_columns(time))}"


def advance(
    pipeline: str, node: str, worker: int, time: object, *, seal: bool, remember: bool = True
) -> Action:
    """The worker's capability moved to ``time``; with ``seal``, an empty message at every
    epoch it passes where it sent nothing. With ``remember``, the hold cache keeps where it
    arrived (``HoldCache.arrivals``): a replay's advance does not, as its sends may come at
    times ahead of the worker."""

    def effect(handle: InputHandle, s: Session) -> InputEffect:
        origin = Origin.input(node, worker)
        to = handle.check_advance(time)
        if to == handle.time:
            return handle.advance_to(to), [], origin
        arrived = s.cache.arrivals.pop((pipeline, node, worker), None)
        if remember:
            s.cache.arrivals[pipeline, node, worker] = (to, False)
        if not seal:
            return handle.advance_to(to), [], origin
        start = handle.time
        if type(start) is not int or type(to) is not int:
            raise LedgerError(
                f"pipeline {pipeline!r}, source {node!r}, worker {worker}: sealing applies to "
                f"int epochs only, not {to}; nothing was committed"
            )
        # What this hold saw the worker send at ``start`` (a send written with this advance
        # is not in the ledger yet), else what the ledger says.
        if to == start + 1 and arrived is not None and arrived[0] == start:
            sent = {start} if arrived[1] else set()
        else:
            sent = sent_between(s, pipeline, node, worker, start=start, to=to)
            if arrived is not None and arrived == (start, True):
                sent.add(start)
        batch: list[Update] = []
        entries: list[MessageEntry] = []
        for epoch in range(start, to):
            if epoch in sent:
                continue
            batch += handle.advance_to(epoch)
            for port in range(handle.graph.node(node).outputs):
                batch += handle.send(port)
                entries.append(MessageEntry(node, port, epoch, f"empty:{node}:{worker}:{epoch}"))
        batch += handle.advance_to(to)
        return batch, entries, origin

    # Capabilities never move back: an advance past where the worker is was never committed.
    return Action(
        lambda handle: advance_key(node, worker, handle.check_advance(time)),
        effect,
        fresh=lambda handle: handle.check_advance(time) != handle.time,
    )


def sent_between(
    s: Session, pipeline: str, node: str, worker: int, *, start: int, to: int
) -> set[int]:
    """The epochs in ``[start, to)`` at which the worker's sends committed."""
    return {
        row[0]
        for row in s.rows(
            "SELECT DISTINCT t0 FROM batches WHERE pipeline = ? AND origin = 'send' "
            "AND node = ? AND worker = ? AND t0 >= ? AND t0 < ?",
            [pipeline, node, worker, start, to],
        )
    }


def close(node: str, worker: int) -> Action:
    """The worker's capability dropped (a closed worker stays closed: nothing happens)."""
    return Action(
        lambda handle: f"close:{node}:{worker}",
        lambda handle, s: (handle.close(), [], Origin.input(node, worker)),
    )


def correct(pipeline: str, node: str, worker: int, message: MessageEntry, port: int) -> Action:
    """The worker's messages at the time of ``message``, a time it has reached, replaced by
    ``message``: the other workers' messages there stay, and nothing is counted or moved. At a
    time it has passed (or any, once closed) it needs a message there to replace (sent, or
    sealed empty): else no output read the epoch's data from it, none would be re-run, and the
    correction would reach nothing (``NothingToCorrectError``). At the time it is at, its data
    is read once the worker passes it (its send or its seal counts the epoch)."""

    def effect(handle: InputHandle, s: Session) -> InputEffect:
        batch = handle.correct(message.time)
        time = message.time
        if handle.has_passed(time) and not queries.worker_sent(
            s, pipeline, node, worker, time, sealed=True
        ):
            current = None if handle.closed else handle.time
            raise NothingToCorrectError(node, worker, current, time, pipeline=pipeline)
        entry = dataclasses.replace(message, stage=node, port=port, replaces=True, worker=worker)
        return batch, [entry], Origin.correction(node, worker, message.time)

    return Action(lambda handle: f"correct:{node}:{worker}:{message.attempt}", effect)


def act(s: Session, pipeline: str, node: str, worker: int, *actions: Action) -> list[CommitResult]:
    """Run ``actions`` in turn on the worker's resumed handle and write their batches (one
    write for all: ``writer.write_batches``) and the worker's new capability, in the caller's
    transaction (each once per key). An action that raises writes nothing of any."""
    graph = s.graph(pipeline)
    at = worker_time(s, pipeline, node, worker)
    handle = InputHandle.resume(graph, node, worker, at, pipeline=pipeline)
    found: list[CommitResult | None] = []
    pending: list[Pending] = []
    for action in actions:
        key = action.key(handle)
        first = None if action.fresh(handle) else committed(s, pipeline, key)
        found.append(first)
        if first is None:
            batch, messages, origin = action.effect(handle, s)
            pending.append(Pending(batch, key, origin, messages))
    written = iter(write_batches(s, pipeline, graph, pending))
    now = None if handle.closed else handle.time
    if now != at:  # a send leaves it where it was: no write
        t = None if now is None else time_to_columns(now)
        s.con.execute(
            "UPDATE capabilities SET t0 = ?, t1 = ? WHERE pipeline = ? AND node = ? AND worker = ?",
            [t[0] if t else None, t[1] if t else None, pipeline, node, worker],
        )
    s.cache.workers[pipeline, node, worker] = now
    return [next(written) if first is None else first for first in found]
