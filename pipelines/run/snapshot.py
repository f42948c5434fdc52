"""A private, consistent copy of an input file (or directory) taken before it is checked.

A send checks and commits the copy, never the original, so what is committed is exactly what
was checked. The copy is consistent when every file's identity (inode, size, modification
time), read from the open file, is the same after the copy as before it; otherwise the writer
was at work during the copy, the copy may hold parts of two versions, and the send is refused
(``InputChangedError``) with nothing committed. A writer that writes a new file and renames it
over the old one is always safe: the copy reads the inode it opened from start to end.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from pipelines.errors import InputChangedError, InputValidationError
from progress import Time

Identity = tuple[int, int, int]

COPY_CHUNK = 1 << 30
"""Bytes asked of ``copy_file_range`` at a time (it copies up to the file's end)."""


def identity(st: os.stat_result) -> Identity:
    """What changes when a file is rewritten in place: inode, size, modification time. (Not
    the change time: a rename over the file's path unlinks the inode and moves it, though the
    bytes read stay whole.)"""
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def _copy_file(source: Path, target: Path) -> bool:
    """Copy one open file whole; whether it stayed the same file while it was read (a rename
    over its path meanwhile does not matter: this reads the inode it opened)."""
    with source.open("rb") as fin:
        before = identity(os.fstat(fin.fileno()))
        with target.open("wb") as fout:
            if not _copy_in_kernel(fin.fileno(), fout.fileno(), before[1]):
                fin.seek(0)
                fout.seek(0)
                fout.truncate()
                shutil.copyfileobj(fin, fout, 1 << 20)
        return identity(os.fstat(fin.fileno())) == before


def _copy_in_kernel(fin: int, fout: int, size: int) -> bool:
    """Copy the ``size`` bytes of ``fin`` into ``fout`` with ``copy_file_range(2)``: the kernel
    moves them (a file system that shares extents makes it a reflink), about half the time of a
    copy through this process's memory. False where it cannot, or copied another number of
    bytes (not Linux, an old kernel, a file system that refuses or says it copied nothing): the
    caller copies through memory."""
    copy_range = getattr(os, "copy_file_range", None)
    if copy_range is None:
        return False
    copied = 0
    try:
        while step := copy_range(fin, fout, COPY_CHUNK):
            copied += step
    except OSError:
        return False
    return copied == size


def _files(source: Path) -> list[Path]:
    return sorted(p.relative_to(source) for p in source.rglob("*") if p.is_file())


def snapshot(stage: str, epoch: Time, source: Path, into: Path) -> Path:
    """Copy ``source`` (a file or a directory of files) into the new directory ``into`` and
    return the copy's path there; raise ``InputChangedError`` naming the file that changed
    during the copy (``into`` is then removed)."""
    name = str(source)
    into.mkdir(parents=True)
    target = into / (source.name or "input")
    changed: str | None = None
    try:
        if source.is_dir():
            listed = _files(source)
            for part in listed:
                (target / part).parent.mkdir(parents=True, exist_ok=True)
                if not _copy_file(source / part, target / part) and changed is None:
                    changed = str(source / part)
            if changed is None and _files(source) != listed:
                changed = name  # a file came or went
        elif not _copy_file(source, target):
            changed = name
    except OSError as err:
        shutil.rmtree(into, ignore_errors=True)
        reason = f"cannot copy the input: {err.strerror or err}"
        raise InputValidationError(stage, epoch, reason, file=name) from err
    if changed is not None:
        shutil.rmtree(into, ignore_errors=True)
        raise InputChangedError(
            stage,
            epoch,
            "the file changed while it was being sent (its size or modification time moved during "
            "the copy); send it again once its writer has finished",
            file=changed,
        )
    return target
