"""The capture directory: Parquet data files and a versioned, self-describing event log.

    DIR/events.jsonl     one JSON object per line: the header, then events 0, 1, 2, ...
    DIR/data/*.parquet   the data of the messages, named by the events that carry them

The header line reads ``{"format": "epochgate-capture", "version": 2, "stream": <id>, ...}``
and says which pipeline, stage, port and worker the stream came from, its minimum time and the
Spark schema of its rows (as JSON). Each event line has ``index`` (0, 1, 2, ...), ``kind``
(``messages``, ``progress`` or ``revision``), ``time`` and ``files`` (``path``, ``rows``,
``bytes``, ``sha256``) or ``changes`` (``[[time, delta], ...]``), ``batch`` (the id of the ledger
batch that committed it, where the stream was captured: a capture resumes after the last one),
``end`` (``true`` on the last event of each append) and ``crc``: the CRC-32 of the line's
canonical JSON without ``crc`` (keys sorted, no spaces). DuckDB reads it as it is (the events
through the last ``end``; it checks no checksum, and refuses a file whose last line is cut
short, which this module's reader leaves out)::

    CREATE VIEW log AS
        SELECT * FROM read_json('DIR/events.jsonl', sample_size = -1);
    SELECT index, kind, time, changes FROM log
    WHERE kind IS NOT NULL AND index <= (SELECT max(index) FROM log WHERE "end")

The events of one append (a sync's: a history is many) are written with one write, flushed and
synced, under an exclusive lock on ``DIR/events.lock``. They count together or not at all: the
lines after the last ``end`` are an append under way or cut short by a kill, and no part of the
log (a last line cut short among them); the writer cuts them off before it appends again, so a
kill inside an append loses the whole append, which the next sync plans again. A log of
version 1 (before ``end``) counts every whole line, and a reader that finds its last line cut
short refuses it (a writer may be inside its write: it looks once more first); the next writer
makes it version 2 before it appends.

A process keeps what it last read and checked of each log: when the log's bytes still begin
with those, only the lines after them are parsed and checked (a follower polling a capture of
1,000 events with nothing new reads it in 0.5 ms instead of 31 ms, and ``Runtime.replay()``
then takes 5 to 8 ms, mostly the ledger's, instead of 35 to 50 ms); any other change reads
the whole log again.
"""

from __future__ import annotations

import copy
import fcntl
import hashlib
import json
import os
import threading
import time as clock
import uuid
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from progress import faults
from progress.capture import (
    DataFile,
    Event,
    Messages,
    Progress,
    Revision,
    Rule,
    StreamChecker,
    StreamError,
)
from progress.faults import FaultPoint

FORMAT = "epochgate-capture"
VERSION = 2
"""The version of the logs this code writes."""
READS = (1, 2)
"""The versions it reads: version 1 has no ``end`` (every whole line is an event)."""
MARKED = 2
"""The first version whose appends are marked ``end``."""
LOG = "events.jsonl"
LOCK = "events.lock"
DATA = "data"


@dataclass(frozen=True)
class Header:
    """Where a stream came from. ``stream`` is its identity (a fresh id per capture), so a
    replay knows a stream again after the directory is copied or moved."""

    stream: str
    pipeline: str
    stage: str
    port: int
    worker: int | None
    minimum: int
    schema: str
    created_at: str
    version: int = VERSION

    def as_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": self.version,
            "stream": self.stream,
            "pipeline": self.pipeline,
            "stage": self.stage,
            "port": self.port,
            "worker": self.worker,
            "minimum": self.minimum,
            "schema": self.schema,
            "created_at": self.created_at,
        }


def new_header(
    pipeline: str, stage: str, *, port: int = 0, worker: int | None = None, schema: str = ""
) -> Header:
    created = clock.strftime("%Y-%m-%dT%H:%M:%SZ", clock.gmtime())
    return Header(uuid.uuid4().hex, pipeline, stage, port, worker, 0, schema, created)


@dataclass(frozen=True)
class Log:
    """A capture read back and checked: its header and every event, in order."""

    directory: Path
    header: Header
    events: tuple[Event, ...]
    batches: tuple[int | None, ...]
    """The ledger batch behind each event, where the capture recorded one."""
    frontiers: tuple[int | None, ...] = ()
    """The least time of the stream's frontier before any event and after each one (None:
    the stream is done)."""

    @property
    def last_batch(self) -> int | None:
        return max((b for b in self.batches if b is not None), default=None)


def _canonical(obj: dict[str, Any]) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def _line(obj: dict[str, Any]) -> bytes:
    body = {k: v for k, v in obj.items() if k != "crc"}
    sealed = dict(body, crc=zlib.crc32(_canonical(body).encode()))
    return (_canonical(sealed) + "\n").encode()


def _files_json(files: Sequence[DataFile]) -> list[dict[str, Any]]:
    return [{"path": f.path, "rows": f.rows, "bytes": f.bytes, "sha256": f.sha256} for f in files]


def event_json(
    index: int, event: Event, batch: int | None = None, *, end: bool = False
) -> dict[str, Any]:
    """An event as its log line's object (without ``crc``); ``end``: the last of its append."""
    out: dict[str, Any]
    if isinstance(event, Progress):
        out = {"index": index, "kind": "progress", "changes": [list(c) for c in event.changes]}
    else:
        kind = "messages" if isinstance(event, Messages) else "revision"
        out = {"index": index, "kind": kind, "time": event.time, "files": _files_json(event.files)}
    if batch is not None:
        out["batch"] = batch
    if end:
        out["end"] = True
    return out


def _event(stream: str, index: int, obj: dict[str, Any]) -> Event:
    try:
        kind = obj["kind"]
        if kind == "progress":
            return Progress(tuple((int(t), int(d)) for t, d in obj["changes"]))
        files = tuple(
            DataFile(str(f["path"]), int(f["rows"]), int(f["bytes"]), str(f["sha256"]))
            for f in obj["files"]
        )
        for f in files:
            _inside(stream, index, f.path)
        if kind == "messages":
            return Messages(obj["time"], files)
        if kind == "revision":
            return Revision(obj["time"], files)
    except (KeyError, TypeError, ValueError) as err:
        raise StreamError(stream, index, Rule.CORRUPT, f"malformed event: {err}") from err
    raise StreamError(stream, index, Rule.CORRUPT, f"unknown event kind {kind!r}")


def _inside(stream: str, index: int, path: str) -> None:
    """Refuse a data file's path that is absolute or climbs out (``..``): a stream names only
    files inside its own directory, so a replay never reads or links anything else."""
    parts = PurePosixPath(path).parts
    if not parts or PurePosixPath(path).is_absolute() or ".." in parts or "\\" in path:
        raise StreamError(stream, index, Rule.ESCAPING_PATH, repr(path))


def _parse(stream: str, index: int | None, raw: bytes) -> dict[str, Any]:
    try:
        obj = json.loads(raw)
    except ValueError as err:
        raise StreamError(stream, index, Rule.CORRUPT, f"not JSON: {err}") from err
    if not isinstance(obj, dict) or "crc" not in obj:
        raise StreamError(stream, index, Rule.CORRUPT, "a line without a checksum")
    body = {k: v for k, v in obj.items() if k != "crc"}
    if zlib.crc32(_canonical(body).encode()) != obj["crc"]:
        raise StreamError(stream, index, Rule.CORRUPT, "checksum mismatch")
    return body


def _header(stream: str, obj: dict[str, Any]) -> Header:
    if obj.get("format") != FORMAT or obj.get("version") not in READS:
        found = f"format {obj.get('format')!r}, version {obj.get('version')!r}"
        known = " and ".join(str(v) for v in READS)
        raise StreamError(stream, None, Rule.FOREIGN, f"{found}; this code reads version {known}")
    try:
        return Header(
            str(obj["stream"]),
            str(obj["pipeline"]),
            str(obj["stage"]),
            int(obj["port"]),
            None if obj["worker"] is None else int(obj["worker"]),
            int(obj["minimum"]),
            str(obj["schema"]),
            str(obj["created_at"]),
            int(obj["version"]),
        )
    except (KeyError, TypeError, ValueError) as err:
        raise StreamError(stream, None, Rule.FOREIGN, f"a header without {err}") from err


def _complete(directory: Path) -> bytes:
    """The log's complete lines. A last line without its newline is part of an append under
    way or cut short by a kill: left out, after a whole header of version 2; else (version 1,
    where each line counts alone) looked at again once (a writer may be inside its one write),
    then refused."""
    path = directory / LOG
    name = str(directory)
    for attempt in range(2):
        try:
            data = path.read_bytes()
        except FileNotFoundError as err:
            raise StreamError(name, None, Rule.FOREIGN, f"no {LOG} in {name}") from err
        if not data or data.endswith(b"\n"):
            return data
        whole = data.rfind(b"\n") + 1
        if whole and _header(name, _parse(name, None, data[: data.index(b"\n")])).version >= MARKED:
            return data[:whole]
        if attempt == 0:
            clock.sleep(0.05)
    raise StreamError(name, data.count(b"\n") - 1, Rule.TRUNCATED, f"{LOG} ends mid-line")


@dataclass
class _Checked:
    """A log's prefix as read and checked, and the checker after it."""

    data: bytes
    header: Header
    checker: StreamChecker
    events: list[Event]
    batches: list[int | None]
    frontiers: list[int | None]


_checked: dict[Path, _Checked] = {}
_checked_lock = threading.Lock()


def read_header(directory: str | Path) -> Header:
    """The header of the capture in ``directory`` (its first line only, checked): what a
    definition needs before any event is read. Raises ``StreamError`` (``FOREIGN``) when there
    is no log, or one of another format or version."""
    directory = Path(directory)
    name = str(directory)
    try:
        with (directory / LOG).open("rb") as fh:
            first = fh.readline()
    except (FileNotFoundError, NotADirectoryError) as err:
        raise StreamError(name, None, Rule.FOREIGN, f"no {LOG} in {name}") from err
    if not first.endswith(b"\n"):
        raise StreamError(name, None, Rule.TRUNCATED, f"{LOG} has no complete header line")
    return _header(name, _parse(name, None, first))


def read(directory: str | Path, *, check_data: bool = False) -> Log:
    """The capture in ``directory``, checked line by line (checksums, indexes, the header's
    version) and against the replay protocol; ``check_data`` also checks every data file's
    size and SHA-256. Raises ``StreamError`` naming the event and the rule it breaks."""
    directory = Path(directory)
    name = str(directory)
    data = _complete(directory)
    if not data:
        raise StreamError(name, None, Rule.TRUNCATED, f"{LOG} is empty")
    key = directory.resolve()
    with _checked_lock:
        known = _checked.get(key)
    if known is None or not data.startswith(known.data):
        first = data.index(b"\n") + 1
        header = _header(name, _parse(name, None, data[:first]))
        checker = StreamChecker(name, header.minimum)
        known = _Checked(data[:first], header, checker, [], [], [_least(checker)])
    elif len(data) > len(known.data):  # the bytes checked before are there: check the rest
        known = _Checked(
            known.data,
            known.header,
            copy.deepcopy(known.checker),
            list(known.events),
            list(known.batches),
            list(known.frontiers),
        )
    data = data[: _appended(name, known.header.version, data, len(known.data))]
    for raw in data[len(known.data) :].splitlines():
        position = len(known.events)
        obj = _parse(name, position, raw)
        if obj.get("index") != position:
            raise StreamError(name, position, Rule.OUT_OF_ORDER, f"index {obj.get('index')!r}")
        event = _event(name, position, obj)
        known.checker.check(event)
        known.events.append(event)
        batch = obj.get("batch")
        known.batches.append(batch if isinstance(batch, int) else None)
        known.frontiers.append(_least(known.checker))
    known.data = data
    with _checked_lock:
        _checked[key] = known
    if check_data:
        for position, event in enumerate(known.events):
            check_files(directory, position, event)
    return Log(
        directory,
        known.header,
        tuple(known.events),
        tuple(known.batches),
        tuple(known.frontiers),
    )


def _least(checker: StreamChecker) -> int | None:
    return min(checker.frontier, default=None)


def check_files(directory: Path, index: int, event: Event) -> None:
    """Raise ``StreamError`` (``DATA_MISSING``) unless every file of ``event`` is there with
    its recorded size and SHA-256."""
    if isinstance(event, Progress):
        return
    root = directory.resolve()
    for f in event.files:
        path = directory / f.path
        if not path.resolve().is_relative_to(root):  # a link inside that points out
            raise StreamError(str(directory), index, Rule.ESCAPING_PATH, repr(f.path))
        if not path.is_file() or path.stat().st_size != f.bytes or sha256(path) != f.sha256:
            raise StreamError(str(directory), index, Rule.DATA_MISSING, f.path)


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


@contextmanager
def locked(directory: str | Path) -> Iterator[Path]:
    """Hold the directory's writer lock (one writer at a time, across processes)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    fd = os.open(directory / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield directory
    finally:
        os.close(fd)


def create(directory: str | Path, header: Header) -> None:
    """Start a log with ``header`` in ``directory`` (which must not hold one yet)."""
    with locked(directory) as d:
        path = d / LOG
        if path.exists() and path.stat().st_size:
            raise StreamError(str(d), None, Rule.FOREIGN, f"{LOG} exists already")
        (d / DATA).mkdir(exist_ok=True)
        _append(path, [_line(header.as_json())])


def append(
    directory: str | Path,
    first_index: int,
    events: Sequence[Event],
    batches: Sequence[int | None] | None = None,
) -> None:
    """Append ``events`` (committed by ledger ``batches``, where known) as indexes
    ``first_index, ...``: the caller holds ``locked`` and knows the log's ``length``."""
    path = Path(directory) / LOG
    of = list(batches) if batches is not None else [None] * len(events)
    last = len(events) - 1
    _append(
        path,
        [_line(event_json(first_index + i, e, of[i], end=i == last)) for i, e in enumerate(events)],
    )


def length(directory: str | Path) -> int:
    """How many events the log holds, after cutting off a torn last line and the lines after
    the last ``end`` (the caller holds ``locked``: they are then an append that a writer did
    not finish, killed inside its write). A log of version 1 is made version 2 first (its
    last line marked ``end``), so that what this code appends to it counts the same way."""
    path = Path(directory) / LOG
    data = path.read_bytes()
    cut = data.rfind(b"\n") + 1
    if cut:
        first = data.index(b"\n") + 1
        name = str(directory)
        header = _parse(name, None, data[:first])
        if _header(name, header).version < MARKED:
            data = _upgraded(path, header, data[:cut], first)
            cut = len(data)
        cut = _appended(name, VERSION, data[:cut], first)
    if cut != len(data):
        with path.open("r+b") as fh:
            fh.truncate(cut)
            fh.flush()
            os.fsync(fh.fileno())
    return max(data[:cut].count(b"\n") - 1, 0)


def _upgraded(path: Path, header: dict[str, Any], data: bytes, first: int) -> bytes:
    """The version 1 log ``data`` (whole lines) written again as version 2, in place of the
    file at once: every line was an event of its own, so the last one ends an append."""
    lines = data[first:].splitlines(keepends=True)
    if lines:
        lines[-1] = _line(dict(_parse(str(path.parent), len(lines) - 1, lines[-1]), end=True))
    out = b"".join([_line(dict(header, version=VERSION)), *lines])
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("wb") as fh:
        fh.write(out)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    return out


def _appended(stream: str, version: int, data: bytes, start: int) -> int:
    """Where the whole appends end in ``data`` (whole lines; those before ``start`` are whole
    appends already): after its last line with ``end`` (version 1: after its last line). A
    line that does not parse ends the search there: the reader refuses it, naming it."""
    if version < MARKED:
        return len(data)
    end = len(data)
    while end > start:
        begin = max(data.rfind(b"\n", start, end - 1) + 1, start)
        try:
            if _parse(stream, None, data[begin:end]).get("end") is True:
                return end
        except StreamError:
            return end
        end = begin
    return start


def _append(path: Path, lines: Sequence[bytes]) -> None:
    data = b"".join(lines)
    # Armed, the write is torn in two around the fault point, as a kill inside it would tear it.
    cut = len(data) // 2 if faults.armed_at(FaultPoint.CAPTURE_APPEND) else len(data)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, data[:cut])
        if cut < len(data):
            os.fsync(fd)
            faults.reach(FaultPoint.CAPTURE_APPEND)
            os.write(fd, data[cut:])
        os.fsync(fd)
    finally:
        os.close(fd)
