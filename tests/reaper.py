"""Every process a test session starts dies with the session, interrupted or not.

A process that leaves its parent's process group or outlives its parent escapes the usual
clean-ups: a Spark JVM ignores SIGINT (PySpark starts it so) and exits only when its stdin closes,
which a forked child may keep open; a daemon made with ``setsid`` gets no Ctrl-C at all. So the
session marks its processes instead: before any test (or xdist worker) starts, the controller
adds an id of its own to ``$TEST_SESSION_IDS``, which every process started since inherits
(workers, JVMs, Dagster daemons and code servers, what they fork). A copy of the controller made
by ``fork`` shows in ``/proc`` the environment the controller was started with, without the id,
so the controller also maps a small memory file named with the id, which a fork inherits (and an
``exec`` drops); so does each xdist worker (``adopt``), whose process titles write over what
``/proc`` shows of its environment, and so of its forks'. At the end of the session the
controller kills whatever is marked (SIGTERM, then SIGKILL after ``GRACE`` seconds), and so does
a watchdog, a small process started at the beginning without the mark, once the controller is
gone however it ended (Ctrl-C, SIGKILL, a crash).

Only what carries the id is touched: another session's processes (other ids, or none), the
controller and its ancestors, and processes of other users are never signalled. A session
started inside another one (a test that runs pytest) appends its id to the outer one's, so its
processes die with either.

``python -m tests.reaper PID ID`` is the watchdog: it waits until process ``PID`` (its parent)
is gone, then kills what carries ``ID``.
"""

from __future__ import annotations

import mmap
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterable
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

from tests.waiting import within

ENV = "TEST_SESSION_IDS"
"""The ids of the test sessions a process belongs to, separated by spaces."""
GRACE = 5.0
"""Seconds a process has to end after SIGTERM before it gets SIGKILL (a JVM runs its shutdown
hooks; a Dagster daemon stops its children)."""
ROUNDS = 5
"""How many times the marked processes are looked for again: a dying process may start others
(which carry the id too)."""
MAPPED = "test-session-"
"""How the memory file a fork of the controller inherits is named: this, then the id."""
WATCH_EVERY = 0.1
"""Seconds between two looks of the watchdog at its parent."""
ROOT = Path(__file__).resolve().parents[1]


@dataclass
class _Controller:
    """What the session's controller keeps for the whole session."""

    session: str
    mapping: mmap.mmap
    watchdog: subprocess.Popen[bytes]


_controller: list[_Controller] = []
"""This process's, when it is a session's controller."""
_adopted: list[mmap.mmap] = []
"""The mappings ``adopt`` made in this process (kept: a fork inherits them)."""


def ids_in(environ: bytes) -> list[str]:
    """The session ids in a process's environment, as ``/proc/PID/environ`` holds it.

    >>> ids_in(b"PATH=/bin\\0TEST_SESSION_IDS=outer inner\\0HOME=/root\\0")
    ['outer', 'inner']
    >>> ids_in(b"PATH=/bin\\0")
    []
    """
    prefix = ENV.encode() + b"="
    for entry in environ.split(b"\0"):
        if entry.startswith(prefix):
            return entry[len(prefix) :].decode(errors="replace").split()
    return []


def carries(pid: int, session: str) -> bool:
    """Whether process ``pid`` is alive (not a zombie, whose environment and maps read empty)
    and marked with ``session``: among the ids of its environment, or mapping the session's
    memory file. A process of another user cannot be read: it is not marked."""
    try:
        if session in ids_in(Path(f"/proc/{pid}/environ").read_bytes()):
            return True
        return f"/memfd:{MAPPED}{session} ".encode() in Path(f"/proc/{pid}/maps").read_bytes()
    except OSError:
        return False


def marked(session: str) -> list[int]:
    """The live processes that carry ``session``."""
    pids = (int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit())
    return [pid for pid in pids if carries(pid, session)]


def stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the command's name (its state first, then its
    parent, ...); None when the process is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()


def parent(pid: int) -> int | None:
    """The parent of process ``pid`` (None: it is gone)."""
    fields = stat(pid)
    return None if fields is None else int(fields[1])


def ancestors(pid: int) -> list[int]:
    """The parent of ``pid``, its parent, and so on up to the first process."""
    found = []
    while pid > 1 and (up := parent(pid)) is not None:
        found.append(up)
        pid = up
    return found


def command(pid: int) -> str:
    """Process ``pid``'s command line, its arguments joined by spaces (``(gone)`` once ended)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "(gone)"
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()[:200]


def running(pid: int) -> bool:
    """Whether process ``pid`` is there and not a zombie (one that has ended, not yet reaped)."""
    fields = stat(pid)
    return fields is not None and fields[0] != "Z"


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid``."""
    pids = (int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit())
    return [child for child in pids if parent(child) == pid]


def reap(session: str, *, grace: float = GRACE, spare: Iterable[int] = ()) -> list[int]:
    """Kill every process that carries ``session``, except this one, its ancestors and
    ``spare``: SIGTERM, then SIGKILL to what is still there after ``grace`` seconds. The pids
    signalled."""
    spared = {os.getpid(), *ancestors(os.getpid()), *spare}
    signalled: list[int] = []
    for _ in range(ROUNDS):
        found = [pid for pid in marked(session) if pid not in spared]
        if not found:
            break
        signalled += found

        def gone(pids: list[int] = found) -> bool:
            return not any(carries(pid, session) for pid in pids)

        _signal(found, session, signal.SIGTERM)
        if not within(gone, grace):
            _signal(found, session, signal.SIGKILL)
            within(gone, grace)
    return signalled


def _signal(pids: list[int], session: str, sig: signal.Signals) -> None:
    for pid in pids:
        if carries(pid, session):  # looked at again just before: a pid is not reused unseen
            with suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)


def start() -> str:
    """Mark this process's environment, and so every process started from now on, with a new
    session id, and start the watchdog (unmarked) that reaps them once this process is gone;
    the id."""
    outer = os.environ.get(ENV, "")
    session = uuid.uuid4().hex
    mapping = _mapped(session)
    watchdog_env = {k: v for k, v in os.environ.items() if k != ENV}
    if outer:
        watchdog_env[ENV] = outer  # it belongs to an outer session, not to this one
    watchdog = subprocess.Popen(
        [sys.executable, "-m", "tests.reaper", str(os.getpid()), session],
        cwd=ROOT,
        env=watchdog_env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,  # holding no pipe of the session: a reader of its output
        stderr=subprocess.DEVNULL,  # sees the end when the session ends
        start_new_session=True,  # out of the terminal's process group: Ctrl-C is not for it
    )
    os.environ[ENV] = f"{outer} {session}".strip()
    _controller.append(_Controller(session, mapping, watchdog))
    return session


def adopt() -> None:
    """In a process of the session started by ``exec`` (an xdist worker): map a memory file
    named with each of its session ids, as the controller does, so that a fork of this process
    carries them even where its environment in ``/proc`` does not (xdist writes each test's
    name as the worker's process title, over the memory its environment is read from)."""
    _adopted.extend(_mapped(session) for session in os.environ.get(ENV, "").split())


def _mapped(session: str) -> mmap.mmap:
    """A page of a memory file named with ``session``, mapped in this process (and so in
    every fork of it)."""
    fd = os.memfd_create(MAPPED + session)
    try:
        os.ftruncate(fd, mmap.PAGESIZE)
        return mmap.mmap(fd, mmap.PAGESIZE)
    finally:
        os.close(fd)  # the mapping stays


def finish(*, spare: Iterable[int] = ()) -> list[int]:
    """At the end of this process's session: kill what carries its id but ``spare`` (nothing
    when this process is not the session's controller); the pids signalled."""
    return [pid for found in _controller for pid in reap(found.session, spare=spare)]


def marks() -> dict[str, str]:
    """This process's mark, for an environment a test builds from scratch (a child started with
    it dies with the session too)."""
    return {ENV: os.environ[ENV]} if ENV in os.environ else {}


def current() -> str:
    """The id of the innermost session this process belongs to."""
    ids = os.environ.get(ENV, "").split()
    if not ids:
        raise RuntimeError(f"${ENV} is not set: this process belongs to no test session")
    return ids[-1]


def _watch(controller: int, session: str) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    within(lambda: os.getppid() != controller, float("inf"), every=WATCH_EVERY)
    reap(session)


if __name__ == "__main__":
    _watch(int(sys.argv[1]), sys.argv[2])
