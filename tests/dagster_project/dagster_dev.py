"""Dagster's own processes under test: ``dagster_project.dev.server`` on the project's
workspace (``workspace.yaml``: the bank example) on a free 127.0.0.1 port, with the runs it
lists and a check that fails the test when it exited."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dagster_project.dev.server import (
    DevServer,
    Serve,
    group_members,
    start,
    stop,
    wait_until_serving,
)
from dagster_project.dev.server import spawn as spawn_server
from tests.sockets import free_port

__all__ = [
    "REPO",
    "DagsterDev",
    "Serve",
    "group_members",
    "launch",
    "spawn",
    "stop",
    "wait_until_serving",
]

REPO = Path(__file__).resolve().parents[2]
WORKSPACE = REPO / "workspace.yaml"
"""The project's workspace: the code location of the bank example."""


@dataclass
class DagsterDev(DevServer):
    """A running ``dagster dev`` as tests ask it: its runs, and whether it is still alive."""

    def runs(self) -> list[dict[str, Any]]:
        data = self.graphql(
            "{ runsOrError { ... on Runs { results { runId status startTime endTime "
            "tags { key value } } } ... on PythonError { message } } }"
        )
        found = data["runsOrError"]
        assert "results" in found, found
        runs: list[dict[str, Any]] = found["results"]
        return runs

    def check_alive(self) -> None:
        if self.exited():
            pytest.fail(f"dagster dev exited ({self.process.returncode}):\n{self.log_tail()}")


def launch(workdir: Path, env: dict[str, str], serve: Serve = Serve.DEV) -> DagsterDev:
    """``serve`` on the project's workspace on a free port (see ``dev.server.start``)."""
    dev = start(workdir, env, free_port(), workspace=WORKSPACE, serve=serve)
    return DagsterDev(dev.process, dev.port, dev.log)


def spawn(argv: list[str], *, cwd: Path, env: dict[str, str], port: int, log: Path) -> DagsterDev:
    """``argv`` (something that serves Dagster on ``port``) in its own process group."""
    dev = spawn_server(argv, cwd=cwd, env=env, port=port, log=log)
    return DagsterDev(dev.process, dev.port, dev.log)
