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
import struct
from contextlib import suppress
from pathlib import Path

IN_ATTRIB = 0x00000004
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE_SELF = 0x00000400
IN_MOVE_SELF = 0x00000800
IN_IGNORED = 0x00008000
_MASK = IN_ATTRIB | IN_MOVED_TO | IN_CREATE | IN_DELETE_SELF | IN_MOVE_SELF
_EVENT = struct.Struct("iIII")
"""An inotify event's header: watch, mask, cookie, length of the name that follows."""


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

    def __init__(self, inotify: int, want: Path) -> None:
        self._inotify = inotify
        self._name = os.fsencode(want.name)
        self._wake_read, self._wake_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self.gone = False
        """Whether the directory went away (the watch ended with it)."""

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
        return cls(fd, want)

    def wait(self, timeout: float) -> bool:
        """Sleep until the mark may have been taken (True), ``wake`` was called or ``timeout``
        seconds passed (False)."""
        ready, _, _ = select.select([self._inotify, self._wake_read], [], [], max(0.0, timeout))
        if self._wake_read in ready:
            with suppress(BlockingIOError):
                os.read(self._wake_read, 64)
        return self._inotify in ready and self._marked()

    def wake(self) -> None:
        """End a ``wait`` now (the hold it watches for was let go)."""
        with suppress(BlockingIOError, OSError):
            os.write(self._wake_write, b"x")

    def close(self) -> None:
        for fd in (self._inotify, self._wake_read, self._wake_write):
            with suppress(OSError):
                os.close(fd)

    def _marked(self) -> bool:
        """Read the events queued: whether one is about the mark, or the directory is gone."""
        marked = False
        while True:
            try:
                data = os.read(self._inotify, 65536)
            except BlockingIOError:
                return marked
            at = 0
            while at + _EVENT.size <= len(data):
                _, mask, _, length = _EVENT.unpack_from(data, at)
                name = data[at + _EVENT.size : at + _EVENT.size + length].rstrip(b"\0")
                at += _EVENT.size + length
                if mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED):
                    self.gone = marked = True
                elif name == self._name:
                    marked = True
