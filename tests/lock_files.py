"""Whether a file's lock (``FILE.lock``, taken by whoever has the file attached) is free, for
the tests of files kept attached between uses (the ledger, the state store)."""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path


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
    deadline = time.monotonic() + seconds
    while not free(path) and time.monotonic() < deadline:
        time.sleep(0.02)
    return free(path)
