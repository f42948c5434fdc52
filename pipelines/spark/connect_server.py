"""A local Spark Connect server: start, stop and status, one per port.

``epochgate spark start`` runs ``sbin/start-connect-server.sh`` from the installed pyspark
wheel (the wheel is the Spark home) with a local master, listening on 127.0.0.1 only, with the
small local settings of ``pipelines.spark.session``. Spark's daemon script writes the server's pid
file and log under ``$EPOCHGATE_HOME/connect/PORT/`` (``pid/`` and ``log/``), so several ports
can each run a server, and neither file lands in the wheel or in ``/tmp``. The server asks every
client for a fresh token kept beside them (``pipelines.spark.connect_token``). Start returns once a
client has run a query, and prints the ``sc://127.0.0.1:PORT`` URL to pass as ``--spark`` or
``EPOCHGATE_SPARK``. Stop sends SIGTERM to the pid in the pid file, waits for the process to
exit, sends SIGKILL if it does not in time, and removes the pid file. ``connect_session`` is
both around a block of code: a server started for the block, a client session on it, and both
stopped after it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pipelines.errors import ConnectServerError
from pipelines.settings import CONNECT_DIR, state_dir
from pipelines.spark import jvm, servers
from pipelines.spark._internals import (
    CONNECT_SERVER_SCRIPT,
    pyspark_home,
    quiet_connect_client,
)
from pipelines.spark.connect_token import (
    LOCAL_NAME,
    TOKEN_ENV,
    forget_token,
    new_token,
    read_token,
)
from pipelines.spark.servers import (
    HOST,
    accepts,
    check_port,
    first_query,
    free_port,
    read_pid,
    runs,
    terminate,
)
from pipelines.spark.session import BIND_KEYS, LOCAL_CONF

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_PORT = 15002
DEFAULT_MASTER = "local[2]"
SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
IDENT = "epochgate"  # SPARK_IDENT_STRING: names the pid and log files

# The server's settings beyond ``LOCAL_CONF``: every socket of the driver on loopback.
SERVER_CONF = dict.fromkeys(BIND_KEYS, HOST)

Echo = Callable[[str], None]


@dataclass(frozen=True)
class ServerStatus:
    """What runs on one port: the pid from the pid file when that process is the server."""

    port: int
    pid: int | None
    log: Path | None
    token: bool = False
    """Whether the server asks its clients for the token epochgate keeps for it."""

    @property
    def running(self) -> bool:
        return self.pid is not None

    @property
    def url(self) -> str:
        return connect_url(self.port)

    def describe(self) -> str:
        if self.pid is None:
            return f"not running  {self.url}"
        log = f"  log {self.log}" if self.log else ""
        token = "  token required" if self.token else ""
        return f"running      {self.url}  pid {self.pid}{token}{log}"


def connect_url(port: int) -> str:
    return f"sc://{HOST}:{port}"


def server_dir(port: int) -> Path:
    """Where the server on ``port`` keeps its pid file and log (absolute)."""
    return state_dir() / CONNECT_DIR / str(port)


def pid_file(port: int) -> Path:
    return server_dir(port) / "pid" / f"spark-{IDENT}-{SERVER_CLASS}-1.pid"


def log_file(port: int) -> Path | None:
    """The server's current log (Spark's daemon script rotates older ones to ``.out.N``)."""
    logs = sorted((server_dir(port) / "log").glob(f"spark-{IDENT}-{SERVER_CLASS}-1-*.out"))
    return max(logs, key=lambda p: p.stat().st_mtime) if logs else None


def spark_home(port: int = DEFAULT_PORT) -> Path:
    """The installed pyspark package, which carries Spark's jars and ``sbin`` scripts."""
    home = pyspark_home()
    if not (home / CONNECT_SERVER_SCRIPT).is_file():
        raise ConnectServerError(
            port, f"the pyspark package at {home} has no {CONNECT_SERVER_SCRIPT}"
        )
    return home


def known_ports() -> list[int]:
    """Ports that have a server directory under the state directory, in order."""
    root = state_dir() / CONNECT_DIR
    if not root.is_dir():
        return []
    return sorted(int(d.name) for d in root.iterdir() if d.is_dir() and d.name.isdigit())


def statuses(port: int | None = None) -> list[ServerStatus]:
    """The server on ``port``, or when none is given every port the state directory knows
    (the default port when it knows none)."""
    ports = [port] if port is not None else known_ports() or [DEFAULT_PORT]
    return [status(p) for p in ports]


def status(port: int = DEFAULT_PORT) -> ServerStatus:
    """The server on ``port``: running when the pid file names a live Spark Connect server."""
    pid = read_pid(pid_file(port))
    alive = pid if pid is not None and _is_server(pid, port) else None
    return ServerStatus(port, alive, log_file(port), token=read_token(port) is not None)


def start(
    port: int = DEFAULT_PORT,
    *,
    master: str = DEFAULT_MASTER,
    timeout: float = 120.0,
    echo: Echo = print,
) -> ServerStatus:
    """Start a server on ``port`` and wait until a client query runs on it (see module docs).

    Succeeds at once when one already runs there. Raises ``ConnectServerError`` naming the log
    when the server exits or does not answer within ``timeout`` seconds; the half-started
    server is stopped then.
    """
    check_port(port, ConnectServerError)
    return servers.start_once(
        server_dir(port),
        lambda: status(port),
        lambda: _start(port, master, timeout, echo),
        lambda c: f"Spark Connect server already running on port {port} (pid {c.pid})",
        echo,
    )


def _start(port: int, master: str, timeout: float, echo: Echo) -> ServerStatus:
    pid_file(port).unlink(missing_ok=True)  # a stale one, left by a server that died
    if accepts(port):
        raise ConnectServerError(
            port, "the port is in use by another process; pass --port to choose another"
        )
    home = spark_home(port)
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        raise ConnectServerError(port, "no Java: install Java 17 or set JAVA_HOME")
    directory = server_dir(port)
    conf = jvm.driver_conf(
        {
            **LOCAL_CONF,
            **SERVER_CONF,
            "spark.connect.grpc.binding.address": HOST,
            "spark.connect.grpc.binding.port": str(port),
        },
        master,
    )
    command = ["bash", str(home / CONNECT_SERVER_SCRIPT), "--master", master]
    for key, value in conf.items():
        command += ["--conf", f"{key}={value}"]
    env = {
        **os.environ,
        "SPARK_HOME": str(home),
        "SPARK_PID_DIR": str(directory / "pid"),
        "SPARK_LOG_DIR": str(directory / "log"),
        "SPARK_IDENT_STRING": IDENT,
        "SPARK_LOCAL_IP": HOST,
        # Python UDF workers of the server run on this interpreter and see its packages.
        "PYSPARK_PYTHON": sys.executable,
        # In the environment, not on the command line, where any local user could read it.
        TOKEN_ENV: new_token(port),
    }
    env.pop("SPARK_NO_DAEMONIZE", None)  # it would keep the server in the foreground
    echo(f"starting a Spark Connect server on port {port} (master {master})")
    started = time.monotonic()
    try:
        launch = subprocess.run(
            command,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            start_new_session=True,  # the server outlives this command and its terminal
            check=False,
            timeout=60,
        )
        pid = read_pid(pid_file(port))
        if launch.returncode != 0 or pid is None:
            said = (launch.stdout + launch.stderr).strip().splitlines()
            why = said[-1] if said else f"exit {launch.returncode}"
            raise ConnectServerError(port, f"the start script failed: {why}", log=log_file(port))
        _wait_until_serving(port, pid, deadline=started + timeout)
    except BaseException:  # a Ctrl-C too: no half-started server is left behind
        pid = read_pid(pid_file(port))
        if pid is not None and _is_server(pid, port):  # an ended pid may be another's now
            terminate(port, pid, timeout=10.0, error=ConnectServerError, log=log_file(port))
        pid_file(port).unlink(missing_ok=True)
        forget_token(port)
        raise
    current = status(port)
    echo(
        f"Spark Connect server running on port {port} (pid {pid}, "
        f"{time.monotonic() - started:.1f}s), log {current.log}"
    )
    echo(current.url)
    return current


def stop(port: int = DEFAULT_PORT, *, timeout: float = 30.0, echo: Echo = print) -> bool:
    """Stop the server on ``port``: SIGTERM, then SIGKILL after ``timeout`` seconds. Returns
    whether one was running; the pid file is gone either way."""
    check_port(port, ConnectServerError)
    with servers.starting(server_dir(port)):  # not a start's token while it starts
        current = status(port)
        if current.pid is None:
            pid_file(port).unlink(missing_ok=True)
            forget_token(port)
            echo(f"no Spark Connect server running on port {port}")
            return False
        how = terminate(
            port, current.pid, timeout=timeout, error=ConnectServerError, log=log_file(port)
        )
        pid_file(port).unlink(missing_ok=True)
        forget_token(port)
    echo(f"stopped the Spark Connect server on port {port} (pid {current.pid}, {how})")
    return True


@dataclass(frozen=True)
class ConnectedSpark:
    """A client session on a Spark Connect server, its URL, and the seconds the server took to
    start (``None`` when it was already running)."""

    spark: SparkSession
    url: str
    start_seconds: float | None


@contextmanager
def connect_session(
    url: str | None = None, *, port: int | None = None, timeout: float = 300.0
) -> Iterator[ConnectedSpark]:
    """A client session on the server at ``url``; with no ``url``, on a server started for the
    block on ``port`` (a free one when ``None``) and stopped after it, by its pid.

    The client's logger is quieted before the session stops: handles still being released when
    it closes would only warn.
    """

    from pipelines.spark.session import spark_session

    started: int | None = None
    seconds: float | None = None
    try:
        if url is None:
            started = port if port is not None else free_port()
            began = time.monotonic()
            url = start(started, echo=lambda _: None, timeout=timeout).url
            seconds = time.monotonic() - began
        spark = spark_session(url)
        try:
            yield ConnectedSpark(spark, url, seconds)
        finally:
            quiet_connect_client()
            spark.stop()
    finally:
        if started is not None:
            stop(started, echo=lambda _: None)


def _wait_until_serving(port: int, pid: int, *, deadline: float) -> None:
    """Return once the port accepts connections and a client's query runs on the server."""
    while not accepts(port):
        if not _is_server(pid, port):
            log = log_file(port)
            why = _first_exception(log)
            reason = "the server exited while starting" + (f" ({why})" if why else "")
            raise ConnectServerError(port, reason, log=log)
        if time.monotonic() > deadline:
            raise ConnectServerError(
                port, "the server did not open its port in time", log=log_file(port)
            )
        time.sleep(0.25)
    error = _first_query(port, deadline)
    if error is not None:
        raise ConnectServerError(port, f"a client query failed: {error}", log=log_file(port))


def _first_query(port: int, deadline: float) -> str | None:
    """A client's query on the server (see ``servers.first_query``), with the server's token
    in the client's environment (off the command line)."""
    env = {**os.environ, TOKEN_ENV: read_token(port) or ""}
    return first_query(f"sc://{LOCAL_NAME}:{port}", deadline, env)


def _first_exception(log: Path | None) -> str | None:
    """The first exception the server's log names, without the thread it was thrown in."""
    if log is None:
        return None
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return None
    for line in lines:
        if "Exception" in line:
            return line.split('Exception in thread "main" ')[-1].strip()[:300]
    return None


def _is_server(pid: int, port: int) -> bool:
    """Whether ``pid`` is a live Spark Connect server process on ``port``."""
    return runs(pid, SERVER_CLASS, f"spark.connect.grpc.binding.port={port}")
