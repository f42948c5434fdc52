"""Sail as an engine: a local Sail server (Spark Connect, in Rust), one per process or started
once with ``epochgate sail start``.

``--spark sail`` (or ``EPOCHGATE_SPARK=sail``) uses the server ``epochgate sail start`` left
running in Sail's local mode, if there is one; else it starts a server for this process on a
free port of 127.0.0.1 and stops it, by its pid, when the process exits. ``sail-local-cluster``
does the same in Sail's local-cluster mode (a driver and workers, as a cluster would run them:
what tests use to exercise the distributed path on one machine).

The server runs in a child process, not inside the client's (``pysail.spark.SparkConnectServer``
would serve from threads of this one): its memory is its own and is measured and freed apart
from the client's, a ``SAIL_MODE`` of its own does not touch this process's environment, the
PySpark version it is shown (``_internals.SAIL_LAUNCHER``) is not the client's, and it is
stopped by a signal to its pid. A server started for a process is also tied to it: on Linux it
gets SIGTERM when the process dies, even by SIGKILL (``PR_SET_PDEATHSIG``), so nothing is left
listening. ``epochgate sail start`` keeps its server's pid, mode and log under
``$EPOCHGATE_HOME/sail/PORT/``; ``stop`` sends SIGTERM, then SIGKILL, and removes the pid file.
"""

from __future__ import annotations

import atexit
import os
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from pipelines.errors import SailServerError, SparkUnavailableError
from pipelines.settings import state_dir
from pipelines.spark import servers
from pipelines.spark._internals import SAIL_SERVER_MARK, check_sail, sail_server_command
from pipelines.spark.connect_token import TOKEN_ENV
from pipelines.spark.servers import HOST, accepts, check_port, free_port, read_pid, runs
from pipelines.spark.spawn import shimmed

DEFAULT_PORT = 50051
"""Where ``epochgate sail start`` listens unless told (Sail's own default port)."""

LOCAL = "local"
LOCAL_CLUSTER = "local-cluster"
MODES = (LOCAL, LOCAL_CLUSTER)
SAIL_URLS = {"sail": LOCAL, "sail-local-cluster": LOCAL_CLUSTER}
"""The engine settings that mean Sail (``session.SAIL_ENGINES``), and the Sail mode
(``SAIL_MODE``) each runs."""
MODE_ENV = "SAIL_MODE"

SAIL_DIR = "sail"
"""Under the state directory: ``PORT/`` of each started server, ``owned/`` for the logs of the
servers started for a process (removed when they stop)."""
PID_FILE, MODE_FILE, LOG_FILE = "pid", "mode", "server.log"

INSTALL_HINT = "install it with: pip install 'epochgate[sail]'"

Echo = Callable[[str], None]


@dataclass(frozen=True)
class SailStatus:
    """What runs on one port: the server's pid (when that process is the server) and mode."""

    port: int
    pid: int | None
    mode: str
    log: Path | None

    @property
    def running(self) -> bool:
        return self.pid is not None

    @property
    def url(self) -> str:
        return f"sc://{HOST}:{self.port}"

    def describe(self) -> str:
        if self.pid is None:
            return f"not running  {self.url}"
        log = f"  log {self.log}" if self.log else ""
        return f"running      {self.url}  pid {self.pid}  mode {self.mode}{log}"


def server_url(engine: str) -> str:
    """The ``sc://`` URL of a Sail server for ``engine`` (a key of ``SAIL_URLS``): one that
    ``epochgate sail start`` left running in its mode, else this process's own, started now if
    it has none (see the module docs). ``spark_session(engine)`` opens a session on it."""
    mode = SAIL_URLS[engine]
    try:
        check_sail()
    except ImportError:
        raise SparkUnavailableError(engine, f"Sail is not installed; {INSTALL_HINT}") from None
    found = running(mode)
    return found.url if found is not None else _owned(mode).url


# -- servers started with ``epochgate sail start`` ---------------------------------------------


def server_dir(port: int) -> Path:
    return state_dir() / SAIL_DIR / str(port)


def known_ports() -> list[int]:
    """Ports that have a server directory under the state directory, in order."""
    root = state_dir() / SAIL_DIR
    if not root.is_dir():
        return []
    return sorted(int(d.name) for d in root.iterdir() if d.is_dir() and d.name.isdigit())


def status(port: int = DEFAULT_PORT) -> SailStatus:
    """The server on ``port``: running when its pid file names a live Sail server."""
    directory = server_dir(port)
    pid = read_pid(directory / PID_FILE)
    try:
        mode = (directory / MODE_FILE).read_text().strip()
    except OSError:
        mode = LOCAL
    log = directory / LOG_FILE
    alive = pid is not None and is_server(pid, port)
    return SailStatus(port, pid if alive else None, mode, log if log.is_file() else None)


def statuses(port: int | None = None) -> list[SailStatus]:
    """The server on ``port``, or every port the state directory knows (the default one when
    it knows none)."""
    ports = [port] if port is not None else known_ports() or [DEFAULT_PORT]
    return [status(p) for p in ports]


def running(mode: str) -> SailStatus | None:
    """A server ``epochgate sail start`` left running in ``mode``: the default port's first."""
    ports = sorted(known_ports(), key=lambda p: (p != DEFAULT_PORT, p))
    for port in ports:
        found = status(port)
        if found.running and found.mode == mode:
            return found
    return None


def start(
    port: int = DEFAULT_PORT,
    *,
    mode: str = LOCAL,
    timeout: float = 60.0,
    echo: Echo = print,
) -> SailStatus:
    """Start a server on ``port`` that outlives this process, and wait until a client's query
    runs on it. Succeeds at once when one already runs there. Raises ``SailServerError``
    naming the log when the server exits or does not answer in ``timeout`` seconds (the
    half-started server is stopped then)."""
    check_port(port, SailServerError)
    _check_mode(port, mode)
    return servers.start_once(
        server_dir(port),
        lambda: status(port),
        lambda: _start(port, mode, timeout, echo),
        lambda c: f"Sail server already running on port {port} (pid {c.pid}, {c.mode})",
        echo,
    )


def _start(port: int, mode: str, timeout: float, echo: Echo) -> SailStatus:
    _need_sail(port)
    directory = server_dir(port)
    (directory / PID_FILE).unlink(missing_ok=True)  # a stale one, left by a server that died
    if accepts(port):
        raise SailServerError(
            port, "the port is in use by another process; pass --port to choose another"
        )
    directory.mkdir(parents=True, exist_ok=True)
    log = directory / LOG_FILE
    echo(f"starting a Sail server on port {port} (mode {mode})")
    began = time.monotonic()
    with log.open("ab") as out:
        process = subprocess.Popen(
            sail_server_command(HOST, port),
            env=_server_env(mode),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # the server outlives this command and its terminal
        )
    (directory / PID_FILE).write_text(f"{process.pid}\n")
    (directory / MODE_FILE).write_text(f"{mode}\n")
    try:
        _wait_until_serving(port, process, log, deadline=began + timeout)
        error = _first_query(port, began + timeout)
        if error is not None:
            raise SailServerError(port, f"a client query failed: {error}", log=log)
        _wait_until_serving(port, process, log, deadline=began + timeout)  # it, not another
    except BaseException:  # a Ctrl-C too: no half-started server is left behind
        if process.poll() is None:  # a pid reaped already may be another process's now
            terminate(port, process.pid, log=log)
        (directory / PID_FILE).unlink(missing_ok=True)
        raise
    current = status(port)
    took = time.monotonic() - began
    echo(f"Sail server running on port {port} (pid {process.pid}, {took:.1f}s), log {log}")
    echo(current.url)
    return current


def stop(port: int = DEFAULT_PORT, *, timeout: float = 30.0, echo: Echo = print) -> bool:
    """Stop the server on ``port``: SIGTERM, then SIGKILL after ``timeout`` seconds. Returns
    whether one was running; the pid file is gone either way."""
    check_port(port, SailServerError)
    with servers.starting(server_dir(port)):  # a start under way ends first
        current = status(port)
        pid_file = server_dir(port) / PID_FILE
        if current.pid is None:
            pid_file.unlink(missing_ok=True)
            echo(f"no Sail server running on port {port}")
            return False
        how = terminate(port, current.pid, timeout=timeout, log=current.log)
        pid_file.unlink(missing_ok=True)
    echo(f"stopped the Sail server on port {port} (pid {current.pid}, {how})")
    return True


# -- the server started for this process ------------------------------------------------------


@dataclass(frozen=True)
class OwnedServer:
    """A server this process started for itself, and the process that started it (a forked
    child inherits the record, not the server)."""

    port: int
    pid: int
    mode: str
    log: Path
    owner: int

    @property
    def url(self) -> str:
        return f"sc://{HOST}:{self.port}"


_owned_servers: dict[str, OwnedServer] = {}
_owned_lock = threading.Lock()


def owned_servers() -> list[OwnedServer]:
    """The servers this process started for itself and has not stopped."""
    return [s for s in _owned_servers.values() if s.owner == os.getpid()]


def _owned(mode: str, *, timeout: float = 60.0) -> OwnedServer:
    """This process's server in ``mode``, started now when it has none (see the module docs)."""
    with _owned_lock:
        found = _owned_servers.get(mode)
        if found is not None and found.owner == os.getpid() and is_server(found.pid, found.port):
            return found
        server = _start_owned(mode, timeout)
        if not _owned_servers:
            atexit.register(stop_owned)
        _owned_servers[mode] = server
        return server


def _start_owned(mode: str, timeout: float, tries: int = 3) -> OwnedServer:
    """Start a server on a free port; another port when a process took that one meanwhile."""
    _need_sail(0)
    logs = state_dir() / SAIL_DIR / "owned"
    logs.mkdir(parents=True, exist_ok=True)
    for attempt in range(tries):
        port = free_port()
        log = logs / f"{os.getpid()}-{port}.log"
        began = time.monotonic()
        with log.open("ab") as out:
            process = _spawn_tied(sail_server_command(HOST, port), _server_env(mode), out)
        try:
            _wait_until_serving(port, process, log, deadline=began + timeout)
        except BaseException as err:
            if process.poll() is None:  # a pid reaped already may be another process's now
                terminate(port, process.pid, log=log)
            if isinstance(err, SailServerError) and attempt + 1 < tries and _in_use(log):
                continue
            raise
        return OwnedServer(port, process.pid, mode, log, os.getpid())
    raise AssertionError("unreachable")  # pragma: no cover


def stop_owned() -> None:
    """Stop the servers this process started for itself, by their pids (run at exit)."""
    with _owned_lock:
        for mode, server in list(_owned_servers.items()):
            if server.owner != os.getpid():
                continue
            try:
                terminate(server.port, server.pid, timeout=10.0, log=server.log)
            except SailServerError:
                continue  # keep the log: it names why the server would not stop
            del _owned_servers[mode]
            server.log.unlink(missing_ok=True)


def _spawn_tied(command: list[str], env: dict[str, str], out: IO[bytes]) -> subprocess.Popen[bytes]:
    """Start ``command`` as a child that gets SIGTERM when this process dies.

    Linux delivers that signal when the *thread* that forked the child ends, so the child is
    forked by a thread that lives as long as the child does: it waits for (and reaps) it. The
    child asks for the signal itself (``pipelines.spark.spawn``: no Python runs between the
    fork and the exec, which live gRPC channels of this process would not survive)."""
    started: list[subprocess.Popen[bytes] | BaseException] = []
    ready = threading.Event()

    def keep() -> None:
        try:
            process = subprocess.Popen(
                shimmed(command, tied=True),
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        except BaseException as err:
            started.append(err)
            ready.set()
            return
        started.append(process)
        ready.set()
        process.wait()

    threading.Thread(target=keep, name="epochgate-sail-server", daemon=True).start()
    ready.wait()
    (result,) = started
    if isinstance(result, BaseException):
        raise result
    return result


# -- shared by both kinds of server -----------------------------------------------------------


def _server_env(mode: str) -> dict[str, str]:
    return {**_without_token(), MODE_ENV: mode}


def _without_token() -> dict[str, str]:
    """This environment without a Spark Connect token: a Sail server asks for none, and
    PySpark would send one to 127.0.0.1 over TLS, which the server does not speak."""
    return {k: v for k, v in os.environ.items() if k != TOKEN_ENV}


def _need_sail(port: int) -> None:
    try:
        check_sail()
    except ImportError:
        raise SailServerError(port, f"Sail is not installed; {INSTALL_HINT}") from None


def _wait_until_serving(
    port: int, process: subprocess.Popen[bytes], log: Path, *, deadline: float
) -> None:
    """Return once the server listens on ``port`` (what accepts there may be another process,
    which the server, unable to bind the port, exits for) and still runs."""
    while (
        not accepts(port)
        or process.poll() is not None
        or servers.listens(process.pid, port) is False
    ):
        if process.poll() is not None:
            why = _last_error(log)
            reason = "the Sail server exited while starting" + (f" ({why})" if why else "")
            raise SailServerError(port, reason, log=log)
        if time.monotonic() > deadline:
            raise SailServerError(port, "the Sail server did not open its port in time", log=log)
        time.sleep(0.05)


def _first_query(port: int, deadline: float) -> str | None:
    return servers.first_query(f"sc://{HOST}:{port}", deadline, _without_token())


def terminate(port: int, pid: int, *, timeout: float = 10.0, log: Path | None = None) -> str:
    """End a server process: SIGTERM, then SIGKILL. Says which one it took."""
    return servers.terminate(port, pid, timeout=timeout, error=SailServerError, log=log)


def is_server(pid: int, port: int) -> bool:
    """Whether ``pid`` is a live Sail server that epochgate started on ``port``."""
    return runs(pid, f"{SAIL_SERVER_MARK} {HOST} {port}")


def _last_error(log: Path) -> str | None:
    """The last line of the server's log that says ERROR, or its last line."""
    try:
        lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return None
    errors = [line for line in lines if "ERROR" in line or "rror:" in line]
    found = (errors or lines or [""])[-1].strip()
    return found[:300] or None


def _in_use(log: Path) -> bool:
    return "in use" in (_last_error(log) or "").lower()


def _check_mode(port: int, mode: str) -> None:
    if mode not in MODES:
        raise SailServerError(port, f"unknown Sail mode {mode!r}; choose one of {MODES}")
