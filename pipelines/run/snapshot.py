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
            shutil.copyfileobj(fin, fout, 1 << 20)
        return identity(os.fstat(fin.fileno())) == before


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
