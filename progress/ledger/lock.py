"""An exclusive, cross-process lock on the ledger file, held from connection open to close.

DuckDB lets one process hold a file read-write, and short-lived connections from several
processes that retry on conflict were seen to lose acknowledged writes. Every connection to the
ledger therefore opens under this lock. A waiter polls; past the timeout it raises an error that
names the holder's pid, which the holder writes into the lock file.
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

from progress.errors import LedgerLockTimeoutError

POLL_SECONDS = 0.002
MAX_POLL_SECONDS = 0.05


class LedgerLock:
    """``with LedgerLock(path, timeout):`` holds an exclusive ``flock`` on ``path``."""

    def __init__(self, path: Path, timeout: float) -> None:
        self.path = path
        self.timeout = timeout
        self._fd: int | None = None

    def acquire(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        started = time.monotonic()
        pause = POLL_SECONDS
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                waited = time.monotonic() - started
                if waited >= self.timeout:
                    holder = self._holder(fd)
                    os.close(fd)
                    raise LedgerLockTimeoutError(str(self.path), waited, holder) from None
                time.sleep(pause)
                pause = min(pause * 2, MAX_POLL_SECONDS)
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._fd = fd

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    @staticmethod
    def _holder(fd: int) -> int | None:
        try:
            return int(os.pread(fd, 32, 0).decode().strip() or 0) or None
        except (OSError, ValueError):
            return None

    def __enter__(self) -> LedgerLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
