"""An exclusive, cross-process lock on the ledger file, held from connection open to close.

DuckDB lets one process hold a file read-write, and short-lived connections from several
processes that retry on conflict were seen to lose acknowledged writes. Every connection to the
ledger therefore opens under this lock. A waiter blocks in the kernel's queue; past the timeout it
raises an error that names the holder's pid, which the holder writes into the lock file.

The lock is the file at the path, not an inode: a lock file deleted (or replaced) while nobody
holds it is simply created again. A waiter that wins the lock of a file no longer at the path
(deleted while it waited) lets it go and locks the one there. A holder whose lock file is
deleted meanwhile still holds a lock nobody else sees: ``intact()`` says so, and the ledger's
transaction asks it before ``COMMIT`` (``Sessions``), rolling back rather than committing under
a lost lock. A lock file that cannot be opened raises ``LedgerUnwritableError`` or
``LedgerFullError`` naming it.
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
import weakref
from contextlib import suppress
from pathlib import Path

from progress import disk
from progress.errors import LedgerLockTimeoutError

_opening: set[int] = set()
"""The descriptors of this process's acquires under way (the lock file, the ``.want`` mark)."""
_holding: weakref.WeakSet[LedgerLock] = weakref.WeakSet()
"""The locks this process holds. A forked child closes its copies of both at once (it never
unlocks them: the locks are the parent's). A copy kept would hold the lock (or the mark) for
as long as the child lives, the parent dead or not: ``flock`` belongs to the open file, which
lives while any descriptor of it does. Every descriptor is in one or the other from its open
to its close, so a fork at any moment finds it."""
_opening_guard = threading.Lock()


def open_tracked(path: Path, label: str) -> int:
    """``path`` opened (created when missing) for a lock or a mark, and tracked until it is
    held (``_held``) or closed (``_closed``); a disk that refuses raises an error naming it."""
    with _opening_guard:  # a fork waits: its child never has a descriptor not yet tracked
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as err:
            found = disk.ledger_error(err, path, label)
            if found is None:
                raise
            raise found from err
        _opening.add(fd)
        return fd


def _held(lock: LedgerLock, fd: int) -> None:
    """``lock`` holds ``fd`` now: tracked as held, in one step (a fork sees one or the other)."""
    with _opening_guard:
        lock._fd = fd
        _holding.add(lock)
        _opening.discard(fd)


def _let_go(lock: LedgerLock) -> int | None:
    """``lock``'s descriptor, taken from it and no longer tracked (the caller closes it)."""
    with _opening_guard:
        fd, lock._fd = lock._fd, None
        _holding.discard(lock)
        return fd


def _closed(fd: int) -> None:
    with _opening_guard:
        _opening.discard(fd)
        os.close(fd)


def _close_in_child() -> None:
    """In a forked child: the guard the fork took given back, and every copy closed."""
    _opening_guard.release()
    for fd in _opening:
        with suppress(OSError):
            os.close(fd)
    _opening.clear()
    for lock in list(_holding):
        lock.forget()


os.register_at_fork(
    before=_opening_guard.acquire,
    after_in_parent=_opening_guard.release,
    after_in_child=_close_in_child,
)


class LedgerLock:
    """``with LedgerLock(path, timeout):`` holds an exclusive ``flock`` on ``path``."""

    def __init__(
        self,
        path: Path,
        timeout: float,
        *,
        want: Path | None = None,
        label: str = "ledger lock file",
    ) -> None:
        self.path = path
        self.timeout = timeout
        self.label = label
        """What the file is, in errors that name it."""
        self.want = want
        """A file on which a waiter holds a shared lock while it waits, so a holder that keeps
        the lock between uses (``AttachedFile``'s linger) sees that it is wanted."""
        self._fd: int | None = None

    def acquire(self) -> None:
        started = time.monotonic()
        while True:
            fd = self._open(self.path)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                self._wait_marked(fd, started)
            if self._at_path(fd):
                break
            fcntl.flock(fd, fcntl.LOCK_UN)  # a file deleted while we waited: lock the new one
            _closed(fd)
        with suppress(OSError):  # the pid only helps a waiter's message (a full disk refuses it)
            os.ftruncate(fd, 0)
            os.pwrite(fd, str(os.getpid()).encode(), 0)
        _held(self, fd)

    def intact(self) -> bool:
        """Whether the lock held is still the lock file at the path (not deleted or replaced
        since it was taken)."""
        return self._fd is not None and self._at_path(self._fd)

    def _at_path(self, fd: int) -> bool:
        try:
            there = os.stat(self.path)
        except FileNotFoundError:
            return False
        mine = os.fstat(fd)
        return (mine.st_dev, mine.st_ino) == (there.st_dev, there.st_ino)

    def _open(self, path: Path) -> int:
        """Open (or create) ``path``, tracked until kept or closed (``open_tracked``)."""
        return open_tracked(path, self.label)

    def _wait_marked(self, fd: int, started: float) -> None:
        """``_wait``, holding a shared lock on ``want`` meanwhile (when there is one)."""
        if self.want is None:
            self._wait(fd, started)
            return
        mark_fd = self._open(self.want)
        try:
            mark(mark_fd)
            self._wait(fd, started)
        finally:
            unmark(mark_fd)

    def _wait(self, fd: int, started: float) -> None:
        """Block in the kernel's queue (fairer than polling, which lets the last holder win
        again and again) on a helper thread, so the wait can time out."""
        got = threading.Event()
        state = threading.Lock()
        abandoned = False

        def block() -> None:
            fcntl.flock(fd, fcntl.LOCK_EX)
            with state:
                if abandoned:
                    fcntl.flock(fd, fcntl.LOCK_UN)
                    _closed(fd)
                else:
                    got.set()

        threading.Thread(target=block, name="ledger-lock-wait", daemon=True).start()
        if got.wait(max(0.0, self.timeout - (time.monotonic() - started))):
            return
        with state:
            if got.is_set():
                return
            abandoned = True
            holder = self._holder()
        raise LedgerLockTimeoutError(str(self.path), time.monotonic() - started, holder)

    def forget(self) -> None:
        """In a forked child: close this copy of the descriptor, never unlocking it (the lock
        is the parent's, and ends when the parent lets it go)."""
        fd = _let_go(self)
        if fd is not None:
            with suppress(OSError):
                os.close(fd)

    def release(self) -> None:
        fd = _let_go(self)
        if fd is not None:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def _holder(self) -> int | None:
        try:
            return int(self.path.read_text().strip() or 0) or None
        except (OSError, ValueError):
            return None

    def __enter__(self) -> LedgerLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def mark(fd: int) -> None:
    """Mark a wait on an open ``.want`` file: a shared lock, then the file's times set, which
    wakes a lingering holder's watcher at once (``want_watch``)."""
    fcntl.flock(fd, fcntl.LOCK_SH)
    with suppress(OSError):  # the lock is the mark; a holder that sleeps on it also looks again
        os.utime(fd)


def unmark(mark: int) -> None:
    """Let go a wait marked with a shared lock on ``mark`` (``.want``), and close it: unlocked
    first, since a forked child's copy of the descriptor would keep the mark otherwise."""
    with suppress(OSError):
        fcntl.flock(mark, fcntl.LOCK_UN)
    _closed(mark)
