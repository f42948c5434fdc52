"""Sleeping until another process wants a file, instead of looking for it every few ms.

A waiter marks its wait with a shared lock on ``{file}.want`` and then touches the mark (sets
its times: ``lock.mark``). A lingering holder's watcher (``engine``) sleeps on a ``WantWatch``:
an inotify watch of the mark's directory, which wakes it when the mark is touched, created or
moved there, or the directory goes away. Looking every 5 ms instead cost a lingering process
about 4% of a core while idle and slowed its other Python threads by about a sixth (each look
takes the interpreter's lock from them).

Where the kernel has no inotify (not Linux) or refuses another instance (its per-user limit),
``WantWatch.open`` returns None and the watcher looks every ``engine.WANT_POLL`` seconds.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import select
from contextlib import suppress
from pathlib import Path

IN_ATTRIB = 0x00000004
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE_SELF = 0x00000400
IN_MOVE_SELF = 0x00000800
_MASK = IN_ATTRIB | IN_MOVED_TO | IN_CREATE | IN_DELETE_SELF | IN_MOVE_SELF
"""What wakes the watcher. Any event in the directory does (the watcher then looks at the mark
itself): the few others than the mark's cost a look each, and no event is parsed."""


def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name, use_errno=True)
        libc.inotify_init1  # noqa: B018 (present only where the kernel has inotify)
    except (OSError, AttributeError):
        return None
    return libc


_LIBC = _libc()


class WantWatch:
    """Wakes a sleeping watcher when ``want`` is marked, or when ``wake`` is called."""

    def __init__(self, inotify: int) -> None:
        self._inotify = inotify
        self._wake_read, self._wake_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)

    @classmethod
    def open(cls, want: Path) -> WantWatch | None:
        """A watch of ``want``'s directory, or None where inotify cannot be used."""
        if _LIBC is None:
            return None
        fd = int(_LIBC.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC))
        if fd < 0:
            return None
        if int(_LIBC.inotify_add_watch(fd, os.fsencode(want.parent), _MASK)) < 0:
            os.close(fd)
            return None
        return cls(fd)

    def wait(self, timeout: float) -> None:
        """Sleep until something happened in the mark's directory (the mark may have been
        taken), ``wake`` was called or ``timeout`` seconds passed."""
        ready, _, _ = select.select([self._inotify, self._wake_read], [], [], max(0.0, timeout))
        for fd in ready:  # drain what woke it
            with suppress(BlockingIOError):
                while os.read(fd, 65536):
                    pass

    def wake(self) -> None:
        """End a ``wait`` now (the hold it watches for was let go)."""
        with suppress(BlockingIOError, OSError):
            os.write(self._wake_write, b"x")

    def close(self) -> None:
        for fd in (self._inotify, self._wake_read, self._wake_write):
            with suppress(OSError):
                os.close(fd)
