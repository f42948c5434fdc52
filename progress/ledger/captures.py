"""Captures in the ledger: which stage streams are being recorded where, and the snapshot of a
captured stream that its event log is brought up to.

A capture's row is written in one transaction. A snapshot is read in one session (the ledger
is locked, so it is consistent): the last batch id, the stream's frontier (a stage output's,
from the tracker; one source worker's, from its capability), the stream's messages committed
after a batch, the revisions not yet released in the log, and the current messages at times
the caller names. A message belongs to the stream of one source worker when the batch that
catalogued it names the worker (its sends, seals and corrections). A revision is a stage's
revision batch or a source worker's correction.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from progress.errors import CaptureError
from progress.ledger.queries import tracker
from progress.ledger.records import RunKind
from progress.ledger.sessions import Session
from progress.location import Source
from progress.tracker import Tracker

CAPTURE_COLUMNS = (
    "pipeline, stage, port, worker, directory, stream, from_epoch, started_batch, started_at, "
    "stopped_at"
)
IS_REVISION = (
    f"((b.origin = 'stage' AND b.run_kind = '{RunKind.REVISION.value}') OR b.origin = 'correction')"
)


@dataclass(frozen=True)
class CaptureRecord:
    """A capture: ``stage``'s output ``port`` (only input worker ``worker`` of a source, when
    given) recorded into ``directory`` as stream ``stream``, from epoch ``from_epoch``, since
    batch ``started_batch``. A capture started without one records the stream's frontier then
    as its ``from_epoch``; None: the stream was closed then (or the record is older than that
    rule: its history starts from the frontier at its first sync)."""

    pipeline: str
    stage: str
    port: int
    worker: int | None
    directory: str
    stream: str
    from_epoch: int | None
    started_batch: int
    started_at: datetime
    stopped_at: datetime | None = None

    @property
    def active(self) -> bool:
        return self.stopped_at is None


@dataclass(frozen=True)
class StreamMessage:
    """One committed message of a captured stream: the batch that catalogued it, its epoch,
    its data (``path`` None: an empty message), and whether its batch is a revision."""

    batch: int
    time: int
    path: str | None
    rows: int
    bytes: int
    revision: bool


@dataclass(frozen=True)
class StreamSnapshot:
    """A captured stream as the ledger holds it at batch ``high_water``."""

    high_water: int
    frontier: tuple[int, ...]
    """The least epochs at which the stream may still get messages (empty: done)."""
    window: tuple[StreamMessage, ...]
    """Its messages catalogued from the batch asked for on, in batch order."""
    revisions: tuple[tuple[int, int], ...]
    """``(epoch, batch)`` of its revisions after the batch asked for, in batch order."""
    current: tuple[StreamMessage, ...]
    """Its current messages from the epoch asked for on, in epoch and batch order."""


def _record(row: tuple[Any, ...]) -> CaptureRecord:
    return CaptureRecord(*row)


def start(
    s: Session,
    pipeline: str,
    stage: str,
    *,
    port: int,
    worker: int | None,
    directory: str,
    stream: str,
    from_epoch: int | None,
) -> CaptureRecord:
    """Record a capture of ``(stage, port)`` (of one input worker) into ``directory``, in the
    caller's transaction, from ``from_epoch`` (None: from the stream's frontier now, which
    the record keeps, so the history starts there however late its first sync is written). A
    directory captured now is refused; a stopped capture's row there is replaced."""
    graph = s.graph(pipeline)
    node = graph.node(stage)
    if worker is not None:
        row = s.row(
            "SELECT 1 FROM capabilities WHERE pipeline = ? AND node = ? AND worker = ?",
            [pipeline, stage, worker],
        )
        if node.inputs or row is None:
            raise CaptureError(
                pipeline,
                directory,
                f"there is no input worker {worker} to capture (a worker is captured only "
                "from a source); nothing was recorded",
                stage=stage,
            )
    found = s.row(
        "SELECT stage, stopped_at FROM captures WHERE pipeline = ? AND directory = ?",
        [pipeline, directory],
    )
    if found is not None and found[1] is None:
        raise CaptureError(
            pipeline,
            directory,
            f"already records stage {found[0]!r}; stop it first; nothing was recorded",
            stage=stage,
        )
    s.con.execute(
        "DELETE FROM captures WHERE pipeline = ? AND directory = ?", [pipeline, directory]
    )
    started = high_water(s)
    s.con.execute(
        "INSERT INTO captures VALUES (?, ?, ?, ?, ?, ?, ?, ?, now(), NULL)",
        [pipeline, stage, port, worker, directory, stream, from_epoch, started],
    )
    s.captures_changed()
    got = capture(s, pipeline, directory)
    assert got is not None
    if from_epoch is None and (now := frontier(s, got)):  # where it starts, whenever its
        s.con.execute(  # history is written (a first sync killed may come much later)
            "UPDATE captures SET from_epoch = ? WHERE pipeline = ? AND directory = ?",
            [now[0], pipeline, directory],
        )
        got = dataclasses.replace(got, from_epoch=now[0])
    return got


def stop(s: Session, pipeline: str, directory: str) -> CaptureRecord:
    """Mark the capture into ``directory`` stopped (a stopped one stays as it was)."""
    found = capture(s, pipeline, directory)
    if found is None:
        raise CaptureError(pipeline, directory, "no capture records into this directory")
    if found.active:
        s.con.execute(
            "UPDATE captures SET stopped_at = now() WHERE pipeline = ? AND directory = ?",
            [pipeline, directory],
        )
        s.captures_changed()
    got = capture(s, pipeline, directory)
    assert got is not None
    return got


def capture(s: Session, pipeline: str, directory: str) -> CaptureRecord | None:
    row = s.row(
        f"SELECT {CAPTURE_COLUMNS} FROM captures WHERE pipeline = ? AND directory = ?",
        [pipeline, directory],
    )
    return None if row is None else _record(row)


def captures(s: Session, pipeline: str, *, active: bool = False) -> list[CaptureRecord]:
    """The captures of ``pipeline`` (only those not stopped, with ``active``), by start."""
    where = " AND stopped_at IS NULL" if active else ""
    rows = s.rows(
        f"SELECT {CAPTURE_COLUMNS} FROM captures WHERE pipeline = ?{where} "
        "ORDER BY started_at, directory",
        [pipeline],
    )
    return [_record(r) for r in rows]


def high_water(s: Session) -> int:
    """The id of the last batch committed (0: none)."""
    row = s.row("SELECT coalesce(max(batch_id), 0) FROM batches")
    assert row is not None
    return int(row[0])


def frontier(s: Session, rec: CaptureRecord, counts: Tracker | None = None) -> tuple[int, ...]:
    """The stream's frontier: one input worker's capability, or the tracker's frontier at the
    stage's output port (from ``counts``, the session's tracker, when given)."""
    if rec.worker is not None:
        row = s.row(
            "SELECT t0 FROM capabilities WHERE pipeline = ? AND node = ? AND worker = ?",
            [rec.pipeline, rec.stage, rec.worker],
        )
        return () if row is None or row[0] is None else (int(row[0]),)
    found = (counts or tracker(s, rec.pipeline)).frontier(Source(rec.stage, rec.port))
    return tuple(sorted(t for t in found.elements if isinstance(t, int)))


@dataclass(frozen=True)
class StreamHead:
    """Where a captured stream stands: the last batch that catalogued one of its messages
    after the batch asked for (None: none since), and its frontier."""

    last_batch: int | None
    frontier: tuple[int, ...]


def heads(
    s: Session, records: Sequence[CaptureRecord], after: int, counts: Tracker
) -> dict[str, StreamHead]:
    """Per capture directory, where its stream stands (``counts``: the session's tracker),
    from two queries for all of ``records`` (one pipeline's): the last batch per stage, port
    and batch worker with messages after batch ``after``, and the input workers'
    capabilities."""
    if not records:
        return {}
    pipeline = records[0].pipeline
    last: dict[tuple[str, int, int | None], int] = {}
    for stage, port, worker, batch in s.rows(
        "SELECT m.stage, m.port, b.worker, max(m.batch_id) FROM messages m "
        "JOIN batches b ON b.pipeline = m.pipeline AND b.batch_id = m.batch_id "
        "WHERE m.pipeline = ? AND m.t1 = -1 AND m.batch_id > ? GROUP BY ALL",
        [pipeline, after],
    ):
        last[(stage, int(port), worker)] = int(batch)
    held: dict[tuple[str, int], tuple[int, ...]] = {}
    if any(r.worker is not None for r in records):
        for node, worker, t0 in s.rows(
            "SELECT node, worker, t0 FROM capabilities WHERE pipeline = ?", [pipeline]
        ):
            held[(node, int(worker))] = () if t0 is None else (int(t0),)
    out: dict[str, StreamHead] = {}
    for rec in records:
        found = [
            b
            for (stage, port, worker), b in last.items()
            if stage == rec.stage and port == rec.port and rec.worker in (None, worker)
        ]
        if rec.worker is not None:
            front = held.get((rec.stage, rec.worker), ())
        else:
            front = frontier(s, rec, counts)
        out[rec.directory] = StreamHead(max(found, default=None), front)
    return out


def _stream(rec: CaptureRecord) -> tuple[str, list[Any]]:
    """The join and filter that select the stream's messages (``m``) with their batches."""
    sql = (
        "FROM messages m JOIN batches b ON b.pipeline = m.pipeline AND b.batch_id = m.batch_id "
        "WHERE m.pipeline = ? AND m.stage = ? AND m.port = ? AND m.t1 = -1"
    )
    params: list[Any] = [rec.pipeline, rec.stage, rec.port]
    if rec.worker is not None:
        sql += " AND b.worker = ?"
        params.append(rec.worker)
    return sql, params


def _messages(rows: Sequence[tuple[Any, ...]]) -> tuple[StreamMessage, ...]:
    return tuple(StreamMessage(b, t, p, r, n, bool(v)) for b, t, p, r, n, v in rows)


SELECT = f"SELECT m.batch_id, m.t0, m.path, m.rows, m.bytes, {IS_REVISION} "


def snapshot(
    s: Session,
    rec: CaptureRecord,
    *,
    after: int | None,
    floor: int | None,
    history_from: int | None = None,
    counts: Tracker | None = None,
) -> StreamSnapshot:
    """The stream at the last batch: its frontier; its messages catalogued in batches ``>=
    after`` (none when None); the ``(epoch, batch)`` of its revisions after batch ``floor``
    (none when None); and, for a log's history (``after`` None), its current messages at
    every epoch ``>= history_from`` (None: from its frontier). Call it in a session: every
    part is then read from one state of the ledger (``counts``: the session's tracker, when
    read already)."""
    top = high_water(s)
    found = frontier(s, rec, counts)
    join, params = _stream(rec)
    window: tuple[StreamMessage, ...] = ()
    current: tuple[StreamMessage, ...] = ()
    revisions: list[tuple[int, int]] = []
    if after is not None:  # the window and the revisions before it, in one query
        rows = _messages(
            s.rows(
                SELECT + join + f" AND (m.batch_id >= ? OR ({IS_REVISION} AND m.batch_id > ?)) "
                "ORDER BY m.batch_id, m.t0, m.attempt",
                [*params, after, floor if floor is not None else top],
            )
        )
        window = tuple(m for m in rows if m.batch >= after)
        if floor is not None:
            revisions = sorted({(m.batch, m.time) for m in rows if m.revision and m.batch > floor})
    else:
        start = history_from if history_from is not None else (found[0] if found else None)
        if start is not None:
            current = _messages(
                s.rows(
                    SELECT + join + " AND m.current AND m.t0 >= ? "
                    "ORDER BY m.t0, m.batch_id, m.attempt",
                    [*params, start],
                )
            )
    return StreamSnapshot(top, found, window, tuple((t, b) for b, t in revisions), current)


def current(s: Session, rec: CaptureRecord, times: Sequence[int]) -> tuple[StreamMessage, ...]:
    """The stream's current messages at ``times``, in epoch and batch order."""
    if not times:
        return ()
    join, params = _stream(rec)
    return _messages(
        s.rows(
            SELECT + join + " AND m.current AND m.t0 IN (SELECT unnest(?)) "
            "ORDER BY m.t0, m.batch_id, m.attempt",
            [*params, sorted(set(times))],
        )
    )
