"""A DuckDB file used by one holder at a time, across processes: lock, attach, detach.

Starting a DuckDB engine costs about 15 ms (it builds its catalog of functions); attaching a
file to a running one costs well under 1 ms, and detaching it (which checkpoints it) a few ms
more. So each holder keeps one in-memory engine for its process and attaches the file only while
it holds the file's lock: attached means locked, in every process.

A holder given a ``linger`` keeps the lock and the attachment after a use, for the next use to
find them (a read of a few rows then costs its queries only). It lets them go as soon as another
holder wants the file, after ``linger`` seconds without a use, and at exit. A waiter marks its
wait with a shared lock on ``{file}.want`` (every holder of such a file does: ``marks_waits``);
the lingering holder looks at that mark before each use, after its hold's first use (a waiter
queued before the hold began touched the mark before anything watched it) and, while it
lingers, as soon as a waiter marks it (``want_watch``: the waiter touches the mark, and the
holder's watcher sleeps until then; it looks every ``WANT_POLL`` seconds where it cannot).
Before it detaches it calls ``on_release`` with the connection, so work it put off (counters,
marks) is written before any other holder can read the file.

A fork first takes every holder's guard (waiting at most ``FORK_WAIT`` for a use under way,
the forking thread's own included) and lets go each hold it got, as its linger would, so the
child's copy of the engine has no file attached; the parent's guards are given back once the
child exists. The child starts with nothing held: each holder closes its copies of the parent's
lock descriptors without unlocking them, takes a fresh guard, keeps the parent's engine
referenced for good without ever using or closing it (closing it would write the parent's file
from a stale copy of its memory), and calls ``on_fork`` so its owner drops what the parent will
write itself. The child then waits for the file like any other process. A file still attached
at the fork (in use, on another thread or inside the forking thread's own session) cannot be
attached by the child, which says so (``DatabaseFileError``), and a transaction the child
carries on from such a session is refused at its commit (no lock of its own: ``check_intact``).

A file that refuses a write (a full disk, a read-only file system, an immutable file) raises
``LedgerFullError`` or ``LedgerUnwritableError`` naming it, not DuckDB's own error. A holder
made with ``recreate=False`` (the ledger's) never creates the file again once it has attached
it: a file gone since raises ``LedgerMissingError``, and so does one deleted or replaced while
it is attached, when ``check_intact`` is asked before a commit (with a lock file no longer at
its path: ``LedgerLockLostError``). DuckDB's own lock on the attached file keeps a second process
out even when the lock file was deleted: an attach it refuses is tried again until the lock
timeout, as a wait for the lock would be.
"""

from __future__ import annotations

import atexit
import ctypes
import fcntl
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import duckdb

from progress import disk
from progress.errors import (
    DatabaseFileError,
    LedgerLockLostError,
    LedgerLockTimeoutError,
    LedgerMissingError,
)
from progress.ledger.lock import LedgerLock, mark, open_tracked, unmark
from progress.ledger.want_watch import WantWatch

ALIAS = "attached"
WANT_POLL = 0.005
"""Seconds between a lingering holder's looks for another holder that wants the file, where it
cannot sleep until one marks its wait (``want_watch``)."""
IDLE_LOOK = 0.5
"""Seconds at most between a sleeping watcher's looks at its hold (its linger may change)."""
ATTACH_RETRY = 0.05
"""Seconds between attempts to attach a file another process has attached."""
FORK_WAIT = 0.05
"""Seconds a fork waits for a holder's use under way before leaving its file attached."""


class AttachedFile:
    """One DuckDB file; ``open()`` yields a connection whose current database is the file."""

    def __init__(
        self,
        path: Path,
        lock_timeout: float,
        *,
        linger: float = 0.0,
        on_release: Callable[[Any], None] | None = None,
        on_fork: Callable[[], None] | None = None,
        marks_waits: bool = False,
        label: str = "ledger",
        recreate: bool = True,
        threads: int | None = None,
    ) -> None:
        self.path = path
        self.threads = threads
        """How many threads the engine's queries use (None: DuckDB's default, one per core)."""
        self.label = label
        """What the file is, in errors that name it."""
        self.recreate = recreate
        """Whether a file gone since this holder attached it is created again (else
        ``LedgerMissingError``)."""
        self._identity: tuple[int, int] | None = None  # (device, inode) at the last attach
        self._lock: LedgerLock | None = None  # the lock of the current hold
        self.marks_waits = marks_waits or linger > 0
        """Whether a wait for the file is marked on ``.want`` (every holder of a file that any
        holder lingers on must mark its waits)."""
        self.lock_timeout = lock_timeout
        self.linger = linger
        self.on_release = on_release
        self.on_fork = on_fork
        """Called in a forked child, at the fork (see the module docs)."""
        self._engine: Any = None
        self._guard = threading.Lock()
        self._held: LedgerLock | None = None
        self._last_use = 0.0
        self._want_fd: int | None = None
        self._want_watch: WantWatch | None = None  # what the current hold's watcher sleeps on
        self._watched = 0
        self._attached = False  # whether the engine has the file attached
        self._inherited = False  # a forked child's: the parent's engine had it attached
        self.holds = 0
        """How many times the file was attached by this holder (a new hold may see changes
        that other holders made; within one hold, only this holder's own)."""
        _HOLDERS.add(self)  # at exit, its hold is let go and its engine closed

    @property
    def want_path(self) -> Path:
        return self.path.with_name(self.path.name + ".want")

    @property
    def lock_path(self) -> Path:
        return self.path.with_name(self.path.name + ".lock")

    @contextmanager
    def open(self) -> Iterator[Any]:
        """Hold the file's lock and have it attached (not reentrant: callers nest above it)."""
        if self._inherited:
            raise DatabaseFileError(
                str(self.path),
                "this process was forked while its parent had the file attached (in use), and "
                "still has the parent's copy of it; fork outside the parent's uses of the file, "
                "or start the process with spawn",
            )
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.linger <= 0:
            with LedgerLock(
                self.lock_path,
                self.lock_timeout,
                want=self.want_path if self.marks_waits else None,
                label=f"{self.label} lock file",
            ) as lock:
                con = self._attach()
                self._lock = lock
                self.holds += 1
                try:
                    yield con
                finally:
                    self._lock = None
                    self._detach()
            return
        with self._guard:
            con = self._hold()
            try:
                yield con
            except BaseException:
                self._release()  # leave nothing half-done attached
                raise
            self._last_use = time.monotonic()
            self._watch()

    def release(self) -> None:
        """Let the lock and the attachment go now, if this holder lingers on them."""
        with self._guard:
            self._release()

    def _hold(self) -> Any:
        """The attached connection: the lingering one unless another holder wants the file."""
        if self._held is not None and self._wanted():
            self._release()
        if self._held is None:
            lock = LedgerLock(
                self.lock_path,
                self.lock_timeout,
                want=self.want_path,
                label=f"{self.label} lock file",
            )
            lock.acquire()
            try:
                self._attach()
            except BaseException:
                lock.release()
                raise
            self._held = lock
            self.holds += 1
        return self._engine

    def _attach(self) -> Any:
        if self._engine is None:
            self._engine = (
                duckdb.connect()
                if self.threads is None
                else duckdb.connect(config={"threads": self.threads})
            )
        con = self._engine
        self._detach()  # left by an interrupted use
        if not self.recreate and self._identity is not None and not self.path.exists():
            raise LedgerMissingError(str(self.path), label=self.label)
        quoted = str(self.path).replace("'", "''")
        started = time.monotonic()
        marked: int | None = None  # a wait marked on ``.want``, once the attach is refused
        try:
            while True:
                try:
                    con.execute(f"ATTACH '{quoted}' AS {ALIAS}")
                    self._attached = True
                    break
                except (duckdb.IOException, duckdb.SerializationException) as err:
                    waited = time.monotonic() - started
                    if "Conflicting lock" not in str(err):
                        self.raise_storage_error(err)
                        said = str(err).strip().splitlines()
                        reason = said[0] if said else type(err).__name__
                        raise DatabaseFileError(str(self.path), reason) from err
                    # Another process has it attached: only after its lock file was deleted.
                    # It may linger on it: the mark tells it to let go.
                    if waited >= self.lock_timeout:
                        raise LedgerLockTimeoutError(str(self.path), waited, None) from err
                    if marked is None and self.marks_waits:
                        marked = open_tracked(self.want_path, f"{self.label} want file")
                        mark(marked)
                    time.sleep(ATTACH_RETRY)
        finally:
            if marked is not None:
                unmark(marked)
        try:
            con.execute(f"USE {ALIAS}")
            found = os.stat(self.path)
        except BaseException:
            with suppress(duckdb.Error):
                self._detach()  # attached means locked: never left attached when not held
            raise
        self._identity = (found.st_dev, found.st_ino)
        return con

    def raise_storage_error(self, err: BaseException) -> None:
        """Raise the error naming this file when ``err`` says a disk refused a write."""
        found = disk.ledger_error(err, self.path, self.label)
        if found is not None:
            raise found from err

    def check_intact(self) -> None:
        """Raise unless the current hold's lock is still the lock file at its path and the
        attached file is still the file at its path (see the module docs)."""
        lock = self._lock or self._held
        if lock is None or not lock.intact():  # None: a forked child, inside its parent's hold
            path = lock.path if lock is not None else self.lock_path
            raise LedgerLockLostError(str(path), label=f"{self.label} lock file")
        if self.recreate or self._identity is None:
            return
        try:
            found = os.stat(self.path)
        except FileNotFoundError:
            found = None
        if found is None or (found.st_dev, found.st_ino) != self._identity:
            raise LedgerMissingError(str(self.path), label=self.label)

    def _wanted(self) -> bool:
        """Whether another holder waits for the file (holds a shared lock on ``.want``; one
        deleted or replaced meanwhile is opened again, so a wait marked on it is seen)."""
        if self._want_fd is not None:
            try:
                same = os.path.samestat(os.fstat(self._want_fd), os.stat(self.want_path))
            except FileNotFoundError:
                same = False
            if not same:
                self._close_want()
        if self._want_fd is None:
            try:
                self._want_fd = self._open_want()
            except OSError:
                return True  # its directory is gone: nothing to linger for
        try:
            fcntl.flock(self._want_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(self._want_fd, fcntl.LOCK_UN)
        return False

    def _forked(self) -> None:
        """In a forked child, at the fork (see the module docs): nothing held, nothing used."""
        self._guard = threading.Lock()  # the parent's may have been taken by another thread
        for lock in (self._held, self._lock):
            if lock is not None:
                lock.forget()
        self._held = self._lock = None
        self._close_want()
        watch, self._want_watch = self._want_watch, None
        if watch is not None:
            watch.close()  # this process's copies: the parent's watcher still sleeps on its own
        self._watched = 0
        self._inherited = self._inherited or self._attached  # a grandchild's copy is stale too
        self._attached = False
        if self._engine is not None:
            _INHERITED.append(self._engine)
            ctypes.pythonapi.Py_IncRef(ctypes.py_object(self._engine))  # never freed, even at exit
            self._engine = None
        if self.on_fork is not None:
            self.on_fork()

    def _detach(self) -> None:
        if self._engine is not None:  # None: a forked child leaving its parent's use
            _detach(self._engine)
        self._attached = False

    def _open_want(self) -> int:
        return os.open(self.want_path, os.O_RDWR | os.O_CREAT, 0o644)

    def _close_want(self) -> None:
        fd, self._want_fd = self._want_fd, None
        if fd is not None:
            with suppress(OSError):
                os.close(fd)

    def _release(self) -> None:
        """Write what was put off, detach, unlock (the caller holds the guard)."""
        lock, self._held = self._held, None
        if lock is None:
            return
        self._close_want()  # opened again by the next hold's first look
        con = self._engine
        try:
            if self.on_release is not None:
                self.on_release(con)
        finally:
            try:
                self._detach()
            finally:
                lock.release()
                watch, self._want_watch = self._want_watch, None
                if watch is not None:
                    watch.wake()  # its watcher ends (it closes the watch then, not before)

    def _watch(self) -> None:
        """After a hold's first use: let it go now if another holder waits for the file, else
        start the thread that lets it go later (one per hold)."""
        if self._held is None or self._watched == self.holds:
            return
        self._watched = self.holds
        watch = WantWatch.open(self.want_path)  # opened first: a mark from now on wakes it
        if self._wanted():  # marked before the hold began (queued behind it): no watch saw it
            if watch is not None:
                watch.close()
            self._release()
            return
        self._want_watch = watch
        threading.Thread(  # it keeps the holder alive until the hold ends
            target=_watch,
            args=(self, self.holds, self._want_watch),
            name=f"{self.label}-linger",
            daemon=True,  # at exit the hold is let go by ``_release_all_at_exit``
        ).start()


def _detach(con: Any) -> None:
    """Detach the file. A checkpoint that fails on the way (a full disk) still detaches it, and
    what was committed stays in the file's write-ahead log, read again by the next attach: that
    failure is not an error of this use."""
    con.execute("USE memory")
    try:
        con.execute(f"DETACH DATABASE IF EXISTS {ALIAS}")
    except duckdb.Error:
        attached = con.execute(
            "SELECT count(*) FROM duckdb_databases() WHERE database_name = ?", [ALIAS]
        ).fetchone()
        if attached is not None and attached[0]:
            raise


def _watch(holder: AttachedFile, hold: int, watch: WantWatch | None) -> None:
    """Let ``holder``'s hold number ``hold`` go once it has been idle ``linger`` seconds or
    another holder wants the file. It sleeps on ``watch`` (a waiter's mark wakes it, and so
    does the hold's end) or, without one, looks every ``WANT_POLL`` seconds; a look waits for
    a use under way to end."""
    try:
        while True:
            if watch is None:
                time.sleep(WANT_POLL)
            else:
                idle_in = holder.linger - (time.monotonic() - holder._last_use)
                watch.wait(min(idle_in, IDLE_LOOK))
            with holder._guard:
                if holder._held is None or holder.holds != hold:
                    return  # let go already (a later hold has a watcher of its own)
                idle = time.monotonic() - holder._last_use >= holder.linger
                if idle or holder._wanted():
                    holder._release()
                    return
    finally:
        if watch is not None:
            watch.close()


_HOLDERS: weakref.WeakSet[AttachedFile] = weakref.WeakSet()
"""Every holder of this process, for ``release_all``, the fork's hooks and the exit's."""
_INHERITED: list[Any] = []
"""In a forked child: the parent's engines, never used nor closed."""


def release_all() -> None:
    """Let go now every file this process keeps attached between uses (its ledgers and state
    stores), for instance before removing the directory that holds them. It waits for a use
    under way on another thread; never call it from inside one. Every holder is let go even
    when one fails; the first failure is raised then."""
    failed: BaseException | None = None
    for holder in list(_HOLDERS):
        try:
            holder.release()
        except Exception as err:  # raised below, once every holder was tried
            failed = failed or err
    if failed is not None:
        raise failed


_FORK_GUARDS: list[threading.Lock] = []
"""The guards a fork took (``_before_fork``), given back in the parent after it."""


def _before_fork() -> None:
    """Take every holder's guard (waiting ``FORK_WAIT`` for a use under way) and let the hold of
    each one taken go, so the child's copy of its engine has no file attached."""
    for holder in list(_HOLDERS):
        guard = holder._guard
        if not guard.acquire(timeout=FORK_WAIT):
            continue
        _FORK_GUARDS.append(guard)
        with suppress(Exception):  # the next use raises it, with its context
            holder._release()


def _after_fork_in_parent() -> None:
    while _FORK_GUARDS:
        _FORK_GUARDS.pop().release()


def _after_fork_in_child() -> None:
    _FORK_GUARDS.clear()  # the parent's; every holder takes a fresh guard
    for holder in list(_HOLDERS):
        try:
            holder._forked()
        except Exception:  # a hook cannot raise: this holder refuses instead
            holder._inherited = True


os.register_at_fork(
    before=_before_fork,
    after_in_parent=_after_fork_in_parent,
    after_in_child=_after_fork_in_child,
)


@atexit.register
def _release_all_at_exit() -> None:
    for holder in list(_HOLDERS):
        if holder.linger > 0 or holder._held is not None:  # the others let go after each use
            _release_at_exit(holder)


def _release_at_exit(holder: AttachedFile) -> None:
    """Let the hold go and close the engine (a file already removed is let go as it is)."""
    with holder._guard:
        with suppress(duckdb.Error):
            holder._release()
        if holder._engine is not None:
            holder._engine.close()
            holder._engine = None
