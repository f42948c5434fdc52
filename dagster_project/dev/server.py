"""``dagster dev`` (or ``dagster-webserver``) on a workspace file as a child process: started
in a process group of its own, waited for until it serves, asked over GraphQL, and stopped by
process group. ``workspace_file`` writes a workspace that loads one module's ``Definitions``.

Started in the background from a non-interactive shell, ``dagster dev`` ignores SIGINT and
SIGTERM (the ignored SIGINT disposition is copied to SIGTERM), so the child starts with SIGINT
at its default: then SIGTERM to its group stops it and everything it started (code server,
webserver, daemon, run workers). It runs in a directory of the caller's choosing, on 127.0.0.1
only: a file in the working directory that shadows a package would crash the webserver.
"""

from __future__ import annotations

import contextlib
import enum
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipelines.spark.spawn import shimmed
from progress import EpochgateError

__all__ = [
    "DevServer",
    "DevServerError",
    "Serve",
    "group_members",
    "spawn",
    "start",
    "stop",
    "wait_until_serving",
    "workspace_file",
]

HOST = "127.0.0.1"
BIN = Path(sys.executable).parent
LOG_TAIL = 40
"""Lines of its log an error quotes."""
KILL_WAIT = 10.0
"""Seconds the processes of a group have to be gone after SIGKILL."""


class Serve(enum.Enum):
    """What to start: everything (``dagster dev``: code server, webserver, daemon) or only the
    webserver."""

    DEV = "dev"
    WEBSERVER = "webserver"

    def argv(self) -> list[str]:
        if self is Serve.WEBSERVER:
            return [str(BIN / "dagster-webserver")]
        return [str(BIN / "dagster"), "dev"]


class DevServerError(EpochgateError):
    """A ``dagster dev`` that exited, did not serve in time, or answered GraphQL with errors."""

    def __init__(self, port: int, reason: str, *, log: Path | None = None, tail: str = "") -> None:
        self.port = port
        self.reason = reason
        self.log = log
        where = f"; its log is {log}" if log else ""
        said = f":\n{tail}" if tail else ""
        super().__init__(f"dagster dev on port {port}: {reason}{where}{said}")


@dataclass
class DevServer:
    """A running ``dagster dev``: its process (a process group leader), port and log."""

    process: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def log_tail(self, lines: int = LOG_TAIL) -> str:
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def exited(self) -> bool:
        return self.process.poll() is not None

    def error(self, reason: str) -> DevServerError:
        return DevServerError(self.port, reason, log=self.log, tail=self.log_tail())

    def graphql(self, query: str, variables: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The ``data`` of a GraphQL answer; raises ``DevServerError`` on an answer with
        ``errors``."""
        request = urllib.request.Request(
            f"{self.url}/graphql",
            data=json.dumps({"query": query, "variables": dict(variables or {})}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            body = json.loads(response.read())
        if "errors" in body:
            raise DevServerError(self.port, f"GraphQL errors: {body['errors']}")
        data: dict[str, Any] = body["data"]
        return data


def spawn(
    argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], port: int, log: Path
) -> DevServer:
    """``argv`` (something that serves Dagster on ``port``) in its own process group, its
    output in ``log``, SIGINT at its default so SIGTERM stops it (set by the child itself:
    ``pipelines.spark.spawn``)."""
    with log.open("wb") as out:
        process = subprocess.Popen(
            shimmed(argv, default_sigint=True),
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return DevServer(process, port, log)


def workspace_file(
    path: Path, module: str, attribute: str = "defs", *, working_directory: Path | None = None
) -> Path:
    """Write a workspace file at ``path`` that loads ``attribute`` of ``module`` (imported from
    ``working_directory`` when given, else as installed); returns ``path``.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     print(workspace_file(Path(d) / "w.yaml", "my_project.definitions").read_text(), end="")
    load_from:
      - python_module:
          module_name: my_project.definitions
          attribute: defs
    """
    for what, name in (("module", module), ("attribute", attribute)):
        if not all(part.isidentifier() for part in name.split(".")):
            raise ValueError(f"workspace_file: {what} {name!r} is not a dotted Python name")
    lines = [
        "load_from:",
        "  - python_module:",
        f"      module_name: {module}",
        f"      attribute: {attribute}",
    ]
    if working_directory is not None:
        lines.append(f"      working_directory: {json.dumps(str(working_directory.resolve()))}")
    path.write_text("\n".join(lines) + "\n")
    return path


def start(
    workdir: Path,
    env: Mapping[str, str],
    port: int,
    *,
    workspace: Path,
    serve: Serve = Serve.DEV,
) -> DevServer:
    """``serve`` on the workspace file ``workspace`` at ``127.0.0.1:port``, run in ``workdir``
    (its log is ``workdir/dagster-{serve}.log``); returns at once (see
    ``wait_until_serving``)."""
    argv = [*serve.argv(), "-w", str(workspace), "-h", HOST, "-p", str(port)]
    return spawn(argv, cwd=workdir, env=env, port=port, log=workdir / f"dagster-{serve.value}.log")


def wait_until_serving(dev: DevServer, *, timeout: float = 180.0) -> None:
    """Return once ``/server_info`` answers; raises ``DevServerError`` when the process exits
    or ``timeout`` seconds pass first."""
    deadline = time.monotonic() + timeout
    while True:
        if dev.exited():
            raise dev.error(f"exited with code {dev.process.returncode} while starting")
        try:
            with urllib.request.urlopen(f"{dev.url}/server_info", timeout=5):
                return
        except (urllib.error.URLError, OSError):
            if time.monotonic() > deadline:
                raise dev.error(f"no answer in {timeout:.0f}s") from None
            time.sleep(0.5)


def group_members(pgid: int) -> list[int]:
    """The live (not zombie) processes of a process group."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            found.append(int(stat.parent.name))
    return found


def stop(dev: DevServer, *, timeout: float = 30.0) -> None:
    """SIGTERM to the process group, then SIGKILL to whatever is left of it after ``timeout``;
    the leader is reaped. Raises ``DevServerError`` when a process of the group outlives
    SIGKILL by ``KILL_WAIT`` seconds."""
    pgid = dev.process.pid
    _signal_group(pgid, signal.SIGTERM)
    if not _group_ends(dev, timeout):
        _signal_group(pgid, signal.SIGKILL)
        if not _group_ends(dev, KILL_WAIT):
            left = group_members(pgid)
            raise dev.error(f"processes {left} of its group outlived SIGKILL by {KILL_WAIT:.0f}s")
    dev.process.wait(timeout=10)


def _signal_group(pgid: int, signum: signal.Signals) -> None:
    if group_members(pgid):
        with contextlib.suppress(ProcessLookupError):  # the group ended meanwhile
            os.killpg(pgid, signum)


def _group_ends(dev: DevServer, timeout: float) -> bool:
    """Whether every process of ``dev``'s group is gone within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while group_members(dev.process.pid):
        dev.process.poll()  # reap the leader once it exits
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True
