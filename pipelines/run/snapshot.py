"""A private, consistent copy of an input file (or directory) taken before it is checked.

A send checks and commits the copy, never the original, so what is committed is exactly what
was checked. The copy is consistent when every file's identity (inode, size, modification
time), read from the open file, is the same after the copy as before it, and, for a directory,
when once every file is copied each path still holds the file copied from it and no file came
or went; otherwise the writer was at work during the copy, the copy may hold parts of two
versions, and the send is refused (``InputChangedError``) with nothing committed. A writer that
writes a new file and renames it over the old one is safe for a single file (the copy reads the
inode it opened from start to end); in a directory, such a rename after that file's copy and
before the last file's is a change like any other.
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


def _copy_file(source: Path, target: Path) -> Identity | None:
    """Copy one open file whole; the identity of the file copied, or None when it did not stay
    the same file while it was read (a rename over its path meanwhile does not matter: this
    reads the inode it opened)."""
    with source.open("rb") as fin:
        before = identity(os.fstat(fin.fileno()))
        with target.open("wb") as fout:
            if not _copy_in_kernel(fin.fileno(), fout.fileno(), before[1]):
                fin.seek(0)
                fout.seek(0)
                fout.truncate()
                shutil.copyfileobj(fin, fout, 1 << 20)
        return before if identity(os.fstat(fin.fileno())) == before else None


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


def _copy_dir(source: Path, target: Path) -> str | None:
    """Copy every file of ``source`` into ``target``; the file (or, when one came or went, the
    directory) that changed before the whole copy was made, else None. Each file's copy is
    whole; checked once all are made, each path still holding the file copied from it, the
    copy is one version of the directory, not files of two (a writer that replaced a file
    already copied before the last was copied)."""
    listed = _files(source)
    copied: dict[Path, Identity] = {}
    for part in listed:
        (target / part).parent.mkdir(parents=True, exist_ok=True)
        try:
            found = _copy_file(source / part, target / part)
        except FileNotFoundError:
            return str(source)  # a file went
        if found is None:
            return str(source / part)
        copied[part] = found
    for part, was in copied.items():
        try:
            now = identity((source / part).stat())
        except FileNotFoundError:
            return str(source)  # a file went
        if now != was:
            return str(source / part)
    return str(source) if _files(source) != listed else None  # a file came or went


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
            changed = _copy_dir(source, target)
        elif _copy_file(source, target) is None:
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
            "the file changed while it was being sent (a file's size, modification time or inode "
            "moved during the copy, or a file came or went); send it again once its writer has "
            "finished",
            file=changed,
        )
    return target
