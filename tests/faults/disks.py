"""A small file system to fill, and files made unwritable even to root, for the storage faults.

The small file system is a tmpfs of ``SIZE`` mounted on a fresh directory (the tests run as
root in a container that allows it); where tmpfs cannot be mounted, an ext4 image on a loop
device. Filling it writes a file until the kernel answers ``ENOSPC``; freeing it removes that
file. Root ignores file modes, so "read-only" is ``chattr +i`` (the immutable flag, which
refuses every open for writing, root's too), or where the file system has no such flag, a
read-only bind mount of the file over itself. A mechanism that is not there is tried after the
other; when none works, the test fails saying what each one answered (never a silent skip).
"""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

SIZE_MB = 48
"""Room for a campaign's inputs, ledger, state and a few epochs of data, before it is filled."""


def _run(*command: str) -> str | None:
    """Run ``command``; None when it worked, else what it said."""
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    return None if done.returncode == 0 else f"{' '.join(command)}: {done.stderr.strip()}"


@dataclass
class SmallDisk:
    """A mounted file system of ``SIZE_MB``: ``root`` is its top directory."""

    root: Path
    how: str
    """``tmpfs`` or ``loop`` (an ext4 image)."""

    @property
    def filler(self) -> Path:
        return self.root / "filler"

    def fill(self) -> None:
        """Write until the file system refuses (ENOSPC)."""
        fd = os.open(self.filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        block = b"\0" * 65536
        try:
            while True:
                try:
                    os.write(fd, block)
                except OSError as err:
                    if err.errno != errno.ENOSPC:
                        raise
                    if len(block) == 1:
                        return
                    block = block[: len(block) // 2]  # the last pages too
        finally:
            os.close(fd)

    def free(self) -> None:
        """Give the space back."""
        self.filler.unlink(missing_ok=True)


@contextmanager
def small_disk(where: Path) -> Iterator[SmallDisk]:
    """Mount a small file system on ``where`` (created) for the duration."""
    where.mkdir(parents=True, exist_ok=True)
    said = _run("mount", "-t", "tmpfs", "-o", f"size={SIZE_MB}m", "tmpfs", str(where))
    how = "tmpfs"
    image = where.with_name(where.name + ".img")
    if said is not None:
        how = "loop"
        with image.open("wb") as f:
            f.truncate(SIZE_MB * 1024 * 1024)
        tried = _run("mkfs.ext4", "-q", "-F", str(image)) or _run(
            "mount", "-o", "loop", str(image), str(where)
        )
        if tried is not None:
            pytest.fail(f"no small file system can be mounted here: {said}; {tried}")
    try:
        yield SmallDisk(where, how)
    finally:
        # Lazily: a DuckDB engine of this process may still hold a file there until it exits.
        _run("umount", "-l", str(where))
        image.unlink(missing_ok=True)


@contextmanager
def unwritable(path: Path) -> Iterator[str]:
    """``path`` cannot be opened for writing, by root either, for the duration; yields how."""
    said = _run("chattr", "+i", str(path))
    if said is None:
        undo, how = ["chattr", "-i", str(path)], "chattr +i"
    else:
        tried = _run("mount", "--bind", str(path), str(path)) or _run(
            "mount", "-o", "remount,ro,bind", str(path)
        )
        if tried is not None:
            _run("umount", str(path))
            pytest.fail(f"{path} cannot be made unwritable to root: {said}; {tried}")
        undo, how = ["umount", str(path)], "read-only bind mount"
    try:
        yield how
    finally:
        left = _run(*undo)
        assert left is None, left
