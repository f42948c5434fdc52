"""Dagster's own processes under test: ``dagster dev`` or ``dagster-webserver`` on a free
127.0.0.1 port in a process group of its own, asked over GraphQL, and stopped by process group.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.sockets import free_port

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


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


@dataclass
class DagsterDev:
    """A running ``dagster dev``: its process (a process group leader), port and log."""

    process: subprocess.Popen[bytes]
    port: int
    log: Path

    def graphql(self, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/graphql",
            data=json.dumps({"query": query, "variables": variables or {}}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            body = json.loads(response.read())
        assert "errors" not in body, body["errors"]
        data: dict[str, Any] = body["data"]
        return data

    def runs(self) -> list[dict[str, Any]]:
        data = self.graphql(
            "{ runsOrError { ... on Runs { results { runId status startTime endTime "
            "tags { key value } } } ... on PythonError { message } } }"
        )
        found = data["runsOrError"]
        assert "results" in found, found
        runs: list[dict[str, Any]] = found["results"]
        return runs

    def log_tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-40:])

    def check_alive(self) -> None:
        if self.process.poll() is not None:
            pytest.fail(f"dagster dev exited ({self.process.returncode}):\n{self.log_tail()}")


def launch(workdir: Path, env: dict[str, str], command: str = "dev") -> DagsterDev:
    """``dagster dev`` (or, with ``command="webserver"``, only ``dagster-webserver``) on the
    project's workspace in its own process group, SIGINT at its default so SIGTERM stops it."""
    port = free_port()
    program = [str(BIN / "dagster"), "dev"]
    if command == "webserver":
        program = [str(BIN / "dagster-webserver")]
    argv = [*program, "-w", str(REPO / "workspace.yaml"), "-h", "127.0.0.1", "-p", str(port)]
    # In workdir, no file can shadow a package on the import path.
    return spawn(argv, cwd=workdir, env=env, port=port, log=workdir / f"dagster-{command}.log")


def spawn(argv: list[str], *, cwd: Path, env: dict[str, str], port: int, log: Path) -> DagsterDev:
    """``argv`` (something that serves Dagster on ``port``) in its own process group, its output
    in ``log``, SIGINT at its default so SIGTERM stops it."""
    with log.open("wb") as out:
        process = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # noqa: PLW1509
        )
    return DagsterDev(process, port, log)


def wait_until_serving(dev: DagsterDev, *, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        dev.check_alive()
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{dev.port}/server_info", timeout=5):
                return
        except (urllib.error.URLError, OSError):
            assert time.monotonic() < deadline, f"no answer in {timeout:.0f}s:\n{dev.log_tail()}"
            time.sleep(0.5)


def stop(dev: DagsterDev, *, timeout: float = 30.0) -> None:
    """SIGTERM to the process group, then SIGKILL to whatever is left of it after ``timeout``."""
    pgid = dev.process.pid
    if group_members(pgid):
        os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while group_members(pgid) and time.monotonic() < deadline:
        dev.process.poll()  # reap the leader once it exits
        time.sleep(0.2)
    if group_members(pgid):
        os.killpg(pgid, signal.SIGKILL)
        time.sleep(1.0)
    dev.process.wait(timeout=10)
