"""An exclusive, cross-process lock on the ledger file, held from connection open to close.

DuckDB lets one process hold a file read-write, and short-lived connections from several
processes that retry on conflict were seen to lose acknowledged writes. Every connection to the
ledger therefore opens under this lock. A waiter blocks in the kernel's queue; past the timeout it
raises an error that names the holder's pid, which the holder writes into the lock file.
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
from pathlib import Path

from progress.errors import LedgerLockTimeoutError


class LedgerLock:
    """``with LedgerLock(path, timeout):`` holds an exclusive ``flock`` on ``path``."""

    def __init__(self, path: Path, timeout: float, *, want: Path | None = None) -> None:
        self.path = path
        self.timeout = timeout
        self.want = want
        """A file on which a waiter holds a shared lock while it waits, so a holder that keeps
        the lock between uses (``AttachedFile``'s linger) sees that it is wanted."""
        self._fd: int | None = None

    def acquire(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._wait_marked(fd)
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._fd = fd

    def _wait_marked(self, fd: int) -> None:
        """``_wait``, holding a shared lock on ``want`` meanwhile (when there is one)."""
        if self.want is None:
            self._wait(fd)
            return
        mark = os.open(self.want, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(mark, fcntl.LOCK_SH)
            self._wait(fd)
        finally:
            os.close(mark)  # and its shared lock with it

    def _wait(self, fd: int) -> None:
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
                    os.close(fd)
                else:
                    got.set()

        started = time.monotonic()
        threading.Thread(target=block, name="ledger-lock-wait", daemon=True).start()
        if got.wait(self.timeout):
            return
        with state:
            if got.is_set():
                return
            abandoned = True
            holder = self._holder()
        raise LedgerLockTimeoutError(str(self.path), time.monotonic() - started, holder)

    def release(self) -> None:
        fd, self._fd = self._fd, None
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
