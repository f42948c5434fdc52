"""Sessions on the ledger file: its lock, one connection, transactions, and what a session caches.

Every connection opens under an exclusive OS file lock and lives for one call, or for a session
that groups many calls; sessions nest, and the outermost one holds the connection. While the
lock is held no other process can change the ledger, so a session may cache what it read, and
so may the next sessions of the same hold (``hold_cache``): the graph of each pipeline, the
counts watermark, each pipeline's counts. A rolled-back transaction drops those caches.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import duckdb

from progress import faults
from progress.errors import LedgerSchemaError, UnregisteredPipelineError
from progress.faults import FaultPoint
from progress.graph import Graph
from progress.ledger.engine import AttachedFile
from progress.ledger.hold_cache import HoldCache
from progress.ledger.schema import VERSION, current_version, migrate
from progress.spec import from_spec


class Session:
    """One connection to the ledger file under its lock, and what stays valid while it is held."""

    def __init__(self, con: Any, known: dict[str, Graph], cache: HoldCache) -> None:
        self.con = con
        self._known = known  # graphs by content hash, shared by every session of one ledger
        self.cache = cache
        """What this hold of the file has read (every session of the hold shares it)."""
        self.written: set[str] = set()
        """The pipelines this session's open transaction has written batches for."""

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self.con.execute(sql, list(params)).fetchall()  # type: ignore[no-any-return]

    def row(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        return self.con.execute(sql, list(params)).fetchone()  # type: ignore[no-any-return]

    def graph(self, pipeline: str) -> Graph:
        """The registered graph of ``pipeline``; raises ``UnregisteredPipelineError``."""
        graph = self.cache.graphs.get(pipeline)
        if graph is not None:
            return graph
        row = self.row("SELECT hash FROM graphs WHERE pipeline = ?", [pipeline])
        if row is None:
            known = [r[0] for r in self.rows("SELECT pipeline FROM graphs ORDER BY 1")]
            raise UnregisteredPipelineError(pipeline, known)
        graph = self._known.get(row[0])
        if graph is None:
            spec = self.row("SELECT spec FROM graphs WHERE pipeline = ?", [pipeline])
            assert spec is not None
            graph = self._known[row[0]] = from_spec(json.loads(spec[0]))
        self.cache.graphs[pipeline] = graph
        return graph

    def registered(self, pipeline: str, digest: str, graph: Graph) -> None:
        """Cache ``graph``, just registered for ``pipeline`` under the content hash ``digest``."""
        self._known[digest] = self.cache.graphs[pipeline] = graph

    def watermark(self) -> int:
        """The last batch folded into the counts table."""
        if self.cache.counts_through is None:
            self._read_meta()
            assert self.cache.counts_through is not None
        return self.cache.counts_through

    def _read_meta(self) -> None:
        """The watermark and the captured pipelines, in the one query a commit makes anyway."""
        found = dict(
            self.rows("SELECT key, value FROM meta WHERE key IN ('counts_through', 'captured')")
        )
        self.cache.counts_through = int(found["counts_through"])
        self.cache.captured = frozenset(json.loads(found.get("captured", "[]")))

    def folded(self, through: int) -> None:
        """Record that the counts table now holds every batch up to ``through``."""
        self.con.execute("UPDATE meta SET value = ? WHERE key = 'counts_through'", [str(through)])
        self.cache.counts_through = through

    def wrote(self, pipeline: str) -> None:
        """Note that the open transaction wrote a batch of ``pipeline``."""
        self.written.add(pipeline)

    def captured(self, pipelines: Iterable[str]) -> set[str]:
        """Which of ``pipelines`` have a capture that is not stopped: read with the watermark
        (``meta`` key ``captured``, kept by ``captures_changed``), so a commit pays no query
        of its own for it."""
        if self.cache.captured is None:
            self._read_meta()
            assert self.cache.captured is not None
        return set(self.cache.captured.intersection(pipelines))

    def captures_changed(self) -> None:
        """Record in ``meta`` which pipelines have a capture not stopped (after a capture
        started or stopped, in its transaction)."""
        names = [
            r[0]
            for r in self.rows(
                "SELECT DISTINCT pipeline FROM captures WHERE stopped_at IS NULL ORDER BY 1"
            )
        ]
        self.con.execute(
            "INSERT INTO meta VALUES ('captured', ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            [json.dumps(names)],
        )
        self.cache.captured = frozenset(names)

    def forget(self) -> None:
        """Drop what this session cached (after a rollback it may describe undone writes)."""
        self.cache.clear()
        self.written.clear()


CommitListener = Callable[[frozenset[str]], None]
"""Told, after the outermost session that committed them ends (the ledger free for any
waiter), of the pipelines with a capture not stopped that its transactions wrote batches for."""


LEDGER_THREADS = 1
"""The threads of the ledger's queries. Each is small (a few rows of a pipeline's epochs); a
second thread only adds its hand-off to every statement: one thread takes about a sixth less
CPU per ledger operation (the ledger tests' scenario, 40 epochs: 2.95-3.51 CPU-s against
3.75-3.79, medians of 5)."""


class Sessions:
    """Opens sessions on one ledger file, migrating an older schema on first open. Nested
    sessions and transactions (in one thread) share the outermost; other threads wait.

    A transaction that wrote batches asks, before it commits, which of their pipelines are
    captured (read with the counts watermark, no query of its own); when there are any, the
    listeners are told once the outermost session has ended."""

    def __init__(self, path: Path, lock_timeout: float, linger: float = 0.0) -> None:
        self.path = path
        self._guard = threading.RLock()
        self._file = AttachedFile(
            path,
            lock_timeout,
            linger=linger,
            recreate=False,
            marks_waits=True,
            on_fork=self._forked,
            threads=LEDGER_THREADS,
        )
        self._cache = HoldCache(-1)
        """What this hold of the file has read; a new hold checks the schema's version first."""
        self._known: dict[str, Graph] = {}
        self._current: Session | None = None
        self._in_transaction = False
        self._to_sync: set[str] = set()
        self.listeners: list[CommitListener] = []

    @contextmanager
    def session(self) -> Iterator[Session]:
        """Hold the lock and one connection (keep it short: others wait)."""
        with self._guard:
            if self._current is not None:
                yield self._current
                return
            try:
                with self._file.open() as con:
                    if self._cache.hold != self._file.holds:
                        found = current_version(con)
                        if found > VERSION:
                            raise LedgerSchemaError(str(self.path), found, VERSION)
                        if found < VERSION:
                            migrate(con, found)
                        self._cache = HoldCache(self._file.holds)
                    self._current = Session(con, self._known, self._cache)
                    try:
                        yield self._current
                    finally:
                        self._current = None
            finally:
                captured, self._to_sync = frozenset(self._to_sync), set()
        if captured:  # the ledger is free again: a listener may wait for another lock
            for listener in list(self.listeners):
                listener(captured)

    @contextmanager
    def held(self, linger: float) -> Iterator[None]:
        """Keep the file locked and attached between this process's sessions while inside,
        unless another holder wants it (it gets it within a few ms: ``AttachedFile``'s linger)
        or ``linger`` seconds pass without a session; let go on leaving (after the file's own
        linger, when it has one)."""
        with self._guard:
            outer, self._file.linger = self._file.linger, max(self._file.linger, linger)
        try:
            yield
        finally:
            with self._guard:
                self._file.linger = outer
                if outer <= 0:
                    self._file.release()

    def _forked(self) -> None:
        """In a forked child, at the fork: no session open (the parent's, if another thread had
        one, is the parent's), a fresh guard, nothing to sync, nothing remembered."""
        self._guard = threading.RLock()
        self._current, self._in_transaction = None, False
        self._to_sync = set()
        self._cache = HoldCache(-1)

    def release(self) -> None:
        """Let the file go now, if it is kept between sessions (not inside a session)."""
        with self._guard:
            if self._current is None:
                self._file.release()

    @contextmanager
    def transaction(self) -> Iterator[Session]:
        """A session in one transaction; inside another transaction, the outermost commits."""
        with self.session() as s:
            if self._in_transaction:
                yield s
                return
            s.con.execute("BEGIN TRANSACTION")
            self._in_transaction = True
            s.written.clear()
            try:
                yield s
                captured = s.captured(s.written) if s.written else set()
                faults.reach(FaultPoint.LEDGER_TRANSACTION)  # every write made, no COMMIT
                self._file.check_intact()  # never commit under a lost lock or to a lost file
                s.con.execute("COMMIT")
            except BaseException as err:
                with suppress(duckdb.Error):  # a COMMIT that failed has rolled back already
                    s.con.execute("ROLLBACK")
                s.forget()
                if isinstance(err, duckdb.Error):
                    self._file.raise_storage_error(err)
                raise
            finally:
                self._in_transaction = False
            s.written.clear()
            self._to_sync |= captured
