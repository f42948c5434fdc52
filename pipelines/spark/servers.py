"""What the local servers epochgate starts (a Spark Connect server, a Sail server) have in
common: a port on 127.0.0.1, a pid, and how they are found and stopped."""

from __future__ import annotations

import fcntl
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol, TypeVar

from pipelines.errors import ConnectServerError

HOST = "127.0.0.1"
LISTEN = "0A"
"""The state column of a listening socket in ``/proc/net/tcp``."""

ServerError = type[ConnectServerError]
"""The error a server's failures raise: ``ConnectServerError`` or one of its kinds."""


class Found(Protocol):
    """What a status says of a server: whether it runs, and its URL."""

    @property
    def running(self) -> bool: ...

    @property
    def url(self) -> str: ...


S = TypeVar("S", bound=Found)


def free_port() -> int:
    """A port of 127.0.0.1 nothing listens on now."""
    with socket.socket() as s:
        s.bind((HOST, 0))
        port: int = s.getsockname()[1]
        return port


def accepts(port: int) -> bool:
    """Whether something accepts connections on ``port`` of 127.0.0.1."""
    try:
        socket.create_connection((HOST, port), timeout=1.0).close()
    except OSError:
        return False
    return True


def socket_inodes(pid: int) -> set[str]:
    """The inodes of the sockets process ``pid`` holds open (read from ``/proc``; an fd closed
    meanwhile is left out). Raises ``OSError`` when the process is gone or not ours to read."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:  # closed while we looked
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    return inodes


def listens(pid: int, port: int) -> bool | None:
    """Whether process ``pid`` listens on TCP ``port`` (of any address), read from ``/proc``;
    ``None`` where there is no ``/proc`` to read."""
    if not Path("/proc/net/tcp").is_file():
        return None
    try:
        held = socket_inodes(pid)
    except OSError:
        return False
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/net/{table}").read_text().splitlines()[1:]:
            columns = line.split()
            listening = columns[3] == LISTEN and int(columns[1].rsplit(":", 1)[1], 16) == port
            if listening and columns[9] in held:
                return True
    return False


def check_port(port: int, error: ServerError) -> None:
    if not 1 <= port <= 65535:
        raise error(port, "a port is a number from 1 to 65535")


def read_pid(path: Path) -> int | None:
    """The pid a pid file holds; None when there is none or it holds no number."""
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def runs(pid: int, *marks: str) -> bool:
    """Whether ``pid`` is live (not a zombie) and its command line holds each of ``marks`` as
    whole words: a pid reused by another program, or by a server on another port, does not
    count."""
    found = _command(pid)
    if found is None:
        return False
    state, args = found
    words = f" {' '.join(args.split())} "
    return not state.startswith("Z") and all(f" {mark} " in words for mark in marks)


def _command(pid: int) -> tuple[str, str] | None:
    """The state and the command line of ``pid`` (None: no such process), from ``/proc`` where
    there is one, else from ``ps``."""
    if Path("/proc/self/cmdline").is_file():
        proc = Path(f"/proc/{pid}")
        try:
            args = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return None
        return state, args
    ps = subprocess.run(
        ["ps", "-ww", "-o", "stat=", "-o", "args=", "-p", str(pid)],
        capture_output=True,
        text=True,
        check=False,
    )
    line = ps.stdout.strip()
    if ps.returncode != 0 or not line:
        return None
    state, _, args = line.partition(" ")
    return state, args


@contextmanager
def starting(record: Path) -> Iterator[None]:
    """Hold the right to start or stop the server whose record is the directory ``record``
    (an OS lock on a file beside it, let go when the block ends or the process dies): a
    second start on the same port waits for the first, then finds its server running. The
    server does not inherit it."""
    record.parent.mkdir(parents=True, exist_ok=True)
    with record.with_name(f"{record.name}.lock").open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        yield


def start_once(
    record: Path,
    status: Callable[[], S],
    start: Callable[[], S],
    already: Callable[[S], str],
    echo: Callable[[str], None],
) -> S:
    """The server of ``record`` that runs, said to be running (``already``), else the one
    ``start`` starts: with the right to start it held (``starting``) from the look on."""
    with starting(record):
        current = status()
        if current.running:
            echo(already(current))
            echo(current.url)
            return current
        return start()


def ended(pid: int) -> bool:
    """Whether every thread of ``pid`` has ended (an unreaped zombie has). The JVM's main
    thread ends early in its shutdown, while other threads still hold the port, so on Linux
    each thread is looked at; elsewhere ``ps`` tells."""
    tasks = Path(f"/proc/{pid}/task")
    if Path("/proc/self/task").is_dir():
        try:
            threads = list(tasks.iterdir())
        except OSError:
            return True
        for thread in threads:
            try:
                state = (thread / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue  # the thread ended while we looked
            if state not in ("Z", "X"):
                return False
        return True
    ps = subprocess.run(
        ["ps", "-o", "stat=", "-p", str(pid)], capture_output=True, text=True, check=False
    )
    state = ps.stdout.strip()
    return ps.returncode != 0 or not state or state.startswith("Z")


def first_query(url: str, deadline: float, env: dict[str, str] | None = None) -> str | None:
    """Run ``spark.range(1).count()`` on the server at ``url`` through a client in a child
    process (so this process holds no session; ``env`` is its environment), bounded by
    ``deadline``; the error's last line, or ``None``."""
    probe = (
        "from pyspark.sql import SparkSession\n"
        f"s = SparkSession.builder.remote({url!r}).getOrCreate()\n"
        "assert s.range(1).count() == 1\n"
        "s.stop()\n"
    )
    try:
        done = subprocess.run(
            [sys.executable, "-W", "ignore", "-c", probe],
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            check=False,
            timeout=max(deadline - time.monotonic(), 5.0),
        )
    except subprocess.TimeoutExpired:
        return "no answer in time"
    if done.returncode == 0:
        return None
    lines = done.stderr.strip().splitlines()
    return lines[-1] if lines else f"exit {done.returncode}"


def terminate(
    port: int, pid: int, *, timeout: float, error: ServerError, log: Path | None = None
) -> str:
    """End a server's process: SIGTERM, then SIGKILL after ``timeout`` seconds; says which one
    it took."""
    for sig, wait, how in (
        (signal.SIGTERM, timeout, "SIGTERM"),
        (signal.SIGKILL, 10.0, "SIGKILL"),
    ):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return how
        except PermissionError:
            raise error(port, f"not allowed to signal pid {pid}") from None
        end = time.monotonic() + wait
        while time.monotonic() < end:
            if ended(pid):
                return how
            time.sleep(0.05)
    raise error(port, f"pid {pid} did not exit after SIGKILL", log=log)
