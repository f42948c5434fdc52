"""A private, consistent copy of an input file (or directory) taken before it is checked.

A send checks and commits the copy, never the original, so what is committed is exactly what
was checked. The copy is consistent when every file's identity (inode, size, modification and
change times) is the same after the copy as before it; otherwise the writer was at work during
the copy, the copy may hold parts of two versions, and the send is refused
(``InputChangedError``) with nothing committed. A writer that writes a new file and renames it
over the old one is always safe: the copy reads one inode from start to end.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from pipelines.errors import InputChangedError, InputValidationError
from progress import Time

Identity = tuple[int, int, int, int]


def identity(path: Path) -> Identity:
    """What changes when a file is rewritten: inode, size, modification and change times."""
    st = os.stat(path)
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _files(source: Path) -> list[Path]:
    if source.is_dir():
        return sorted(p for p in source.rglob("*") if p.is_file())
    return [source]


def snapshot(stage: str, epoch: Time, source: Path, into: Path) -> Path:
    """Copy ``source`` (a file or a directory of files) into the new directory ``into`` and
    return the copy's path there; raise ``InputChangedError`` naming the file that changed
    during the copy (``into`` is then removed)."""
    name = str(source)
    into.mkdir(parents=True)
    target = into / (source.name or "input")
    try:
        before = {p: identity(p) for p in _files(source)}
        if source.is_dir():
            shutil.copytree(source, target)
        else:
            shutil.copyfile(source, target)
        after = {p: identity(p) for p in _files(source)}
    except OSError as err:
        shutil.rmtree(into, ignore_errors=True)
        reason = f"cannot copy the input: {err.strerror or err}"
        raise InputValidationError(stage, epoch, reason, file=name) from err
    changed = sorted({*before, *after} - {p for p in before if before[p] == after.get(p)})
    if changed:
        shutil.rmtree(into, ignore_errors=True)
        raise InputChangedError(
            stage,
            epoch,
            "the file changed while it was being sent (its size, times or inode moved during "
            "the copy); send it again once its writer has finished",
            file=str(changed[0]) if source.is_dir() else name,
        )
    return target
