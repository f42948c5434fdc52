"""What a failed write says about the file system under it: full, or not writable.

A write fails the same way whichever library made it, but each reports it its own way: Python
as an ``OSError`` with an ``errno``, DuckDB and Spark (a Java ``IOException`` relayed through
Py4J) only as the operating system's sentence inside their message. ``failure`` reads both and
is the one place that tells a full disk or a read-only file from any other error, for the
ledger, the state store and the data plane alike.

>>> failure(OSError(28, "No space left on device"))
<DiskFailure.FULL: 'no space left on the device'>
>>> failure(Exception('IO Error: Cannot open file "x.duckdb": Read-only file system')).name
'UNWRITABLE'
>>> failure(ValueError("bad value")) is None
True
"""

from __future__ import annotations

import errno
from enum import StrEnum
from pathlib import Path

from progress.errors import LedgerFullError, LedgerStorageError, LedgerUnwritableError


class DiskFailure(StrEnum):
    """Why a file could not be written; each value is the sentence an error shows."""

    FULL = "no space left on the device"
    UNWRITABLE = "it cannot be written (a read-only file system, an immutable file, no permission)"


_ERRNOS = {
    errno.ENOSPC: DiskFailure.FULL,
    errno.EDQUOT: DiskFailure.FULL,
    errno.EROFS: DiskFailure.UNWRITABLE,
    errno.EPERM: DiskFailure.UNWRITABLE,
    errno.EACCES: DiskFailure.UNWRITABLE,
}
_SENTENCES = {
    "No space left on device": DiskFailure.FULL,
    "Disk quota exceeded": DiskFailure.FULL,
    "Read-only file system": DiskFailure.UNWRITABLE,
    "Operation not permitted": DiskFailure.UNWRITABLE,
    "Permission denied": DiskFailure.UNWRITABLE,
}
"""The operating system's sentences (``strerror``) as DuckDB and Java quote them."""


def failure(err: BaseException) -> DiskFailure | None:
    """The disk failure behind ``err`` or an error it was raised from, or None."""
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in _ERRNOS:
            return _ERRNOS[current.errno]
        text = str(current)
        for sentence, found in _SENTENCES.items():
            if sentence in text:
                return found
        current = current.__cause__ or current.__context__
    return None


def ledger_error(err: BaseException, path: Path, label: str) -> LedgerStorageError | None:
    """The error to raise for ``err`` met on the ledger's file ``path`` (``label`` says which
    file it is), or None when it is not a disk failure."""
    found = failure(err)
    if found is None:
        return None
    error = LedgerFullError if found is DiskFailure.FULL else LedgerUnwritableError
    return error(str(path), label=label)
