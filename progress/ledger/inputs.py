"""Input workers in the ledger: each one's durable capability, and its send, advance and close.

Each action resumes the worker's ``InputHandle`` at its recorded time, takes the batch the
handle returns, and writes it with the worker's new capability in the caller's transaction.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable

from progress.errors import LedgerError
from progress.handles import InputHandle
from progress.ledger.records import CommitResult, MessageEntry, Origin
from progress.ledger.sessions import Session
from progress.ledger.writer import committed, write_batch
from progress.timestamp import Time, time_from_columns, time_to_columns
from progress.tracker import Update

InputEffect = tuple[list[Update], list[MessageEntry], Origin]
"""What an input worker's action does: its batch, the messages it catalogs, who did it."""

Action = Callable[[InputHandle, Session], InputEffect]
"""An input worker's action: from its resumed handle (and the open session), its effect."""


def worker_time(s: Session, pipeline: str, node: str, worker: int) -> Time | None:
    """Where an input worker's capability stands (``None`` once closed)."""
    row = s.row(
        "SELECT t0, t1 FROM capabilities WHERE pipeline = ? AND node = ? AND worker = ?",
        [pipeline, node, worker],
    )
    if row is None:
        raise LedgerError(f"pipeline {pipeline!r}: input {node!r} has no worker {worker}")
    return None if row[0] is None else time_from_columns(row[0], row[1])


def send_key(node: str, worker: int, message: MessageEntry | None, key: str | None) -> str:
    """The idempotency key of a send: the caller's, else one per message attempt."""
    attempt = message.attempt if message is not None else uuid.uuid4().hex
    return key or f"send:{node}:{worker}:{attempt}"


def send(node: str, worker: int, message: MessageEntry | None, port: int) -> Action:
    """A message from the worker at its current time."""

    def effect(handle: InputHandle, s: Session) -> InputEffect:
        time = handle.time
        batch = handle.send(port)
        entries = []
        if message is not None:
            entries.append(
                MessageEntry(
                    node, port, time, message.attempt, message.path, message.rows, message.bytes
                )
            )
        return batch, entries, Origin("send", node, worker, time)

    return effect


def advance_key(node: str, worker: int, time: Time) -> str:
    return f"advance:{node}:{worker}:{json.dumps(time_to_columns(time))}"


def advance(pipeline: str, node: str, worker: int, time: Time, *, seal: bool) -> Action:
    """The worker's capability moved to ``time``; with ``seal``, an empty message at every
    epoch it passes where it sent nothing."""

    def effect(handle: InputHandle, s: Session) -> InputEffect:
        origin = Origin.input(node, worker)
        if not seal or time == handle.time:
            return handle.advance_to(time), [], origin
        start = handle.time
        if type(start) is not int or type(time) is not int:
            raise LedgerError(f"input {node!r}: sealing applies to int epochs only")
        InputHandle.resume(handle.graph, node, worker, start).advance_to(time)  # no going back
        sent = {
            row[0]
            for row in s.rows(
                "SELECT DISTINCT t0 FROM batches WHERE pipeline = ? AND origin = 'send' "
                "AND node = ? AND worker = ? AND t0 >= ? AND t0 < ?",
                [pipeline, node, worker, start, time],
            )
        }
        batch: list[Update] = []
        entries: list[MessageEntry] = []
        for epoch in range(start, time):
            if epoch in sent:
                continue
            batch += handle.advance_to(epoch)
            for port in range(handle.graph.node(node).outputs):
                batch += handle.send(port)
                entries.append(MessageEntry(node, port, epoch, f"empty:{node}:{worker}:{epoch}"))
        batch += handle.advance_to(time)
        return batch, entries, origin

    return effect


def close_key(node: str, worker: int) -> str:
    return f"close:{node}:{worker}"


def close(node: str, worker: int) -> Action:
    """The worker's capability dropped."""
    return lambda h, s: (h.close(), [], Origin.input(node, worker))


def act(
    s: Session, pipeline: str, node: str, worker: int, *, key: str, action: Action
) -> CommitResult:
    """Run ``action`` on the worker's resumed handle and write its batch and the worker's new
    capability, in the caller's transaction (once per key)."""
    first = committed(s, pipeline, key)
    if first is not None:
        return first
    graph = s.graph(pipeline)
    handle = InputHandle.resume(graph, node, worker, worker_time(s, pipeline, node, worker))
    batch, messages, origin = action(handle, s)
    result = write_batch(
        s,
        pipeline=pipeline,
        graph=graph,
        batch=batch,
        key=key,
        origin=origin,
        messages=messages,
    )
    t = None if handle.closed else time_to_columns(handle.time)
    s.con.execute(
        "UPDATE capabilities SET t0 = ?, t1 = ? WHERE pipeline = ? AND node = ? AND worker = ?",
        [t[0] if t else None, t[1] if t else None, pipeline, node, worker],
    )
    return result
