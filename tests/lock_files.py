"""Whether a file's lock (``FILE.lock``, taken by whoever has the file attached) is free, and
whether someone waits for it, for the tests of files kept attached between uses (the ledger,
the state store)."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from tests.waiting import within


def free(path: Path) -> bool:
    """Whether no holder has the lock of ``path`` (a fresh descriptor can take it)."""
    fd = os.open(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
    return True


def wait_free(path: Path, seconds: float = 10.0) -> bool:
    """Whether the lock of ``path`` is free within ``seconds``."""
    return within(lambda: free(path), seconds, every=0.02)


def wanted(path: Path) -> bool:
    """Whether a holder waits for ``path`` (holds a shared lock on ``FILE.want`` meanwhile: a
    waiter for its lock, or for DuckDB's own lock on the file when its lock file was deleted)."""
    fd = os.open(path.with_name(path.name + ".want"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def blocked(path: Path) -> bool:
    """Whether a process or thread waits in the kernel for an ``flock`` of the file now at
    ``path`` (a ``->`` line of ``/proc/locks`` naming its device and inode)."""
    try:
        found = os.stat(path)
    except FileNotFoundError:
        return False
    inode = f"{os.major(found.st_dev):02x}:{os.minor(found.st_dev):02x}:{found.st_ino}"
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if fields[1:3] == ["->", "FLOCK"] and fields[6] == inode:
            return True
    return False
