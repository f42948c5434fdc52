"""Every process a test session starts dies with the session: ended normally, interrupted like
Ctrl-C under ``make test`` (xdist, a Spark JVM), or killed outright; and nothing of another
session is touched (``tests.reaper``). Each test runs a session of ``tests/left_behind.py`` in a
process group of its own and looks, in ``/proc``, for what carries that session's id."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import pytest

from tests import reaper
from tests.left_behind import IGNORES_SIGINT, REPORT_ENV, WAIT_ENV
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[1]
TARGET = "tests/left_behind.py"
STARTED = 300.0
"""Seconds a session may take to start its test's processes (xdist workers and a JVM on a
loaded machine)."""
ENDED = 10.0
"""Seconds within which every process of an ended session must be gone: the reaper's grace
(SIGTERM, then SIGKILL) and some."""


class Session:
    """A pytest session of one test of ``tests/left_behind.py``, in a process group of its own
    (as a terminal's foreground job is), and what that test reports."""

    def __init__(self, tmp_path: Path, test: str, *args: str, wait: bool) -> None:
        self.report = tmp_path / "report.json"
        self.log = tmp_path / "session.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
        env[REPORT_ENV] = str(self.report)  # marked with this session's id, as every child
        if wait:
            env[WAIT_ENV] = "1"
        argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", *args]
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                [*argv, f"{TARGET}::{test}"],
                cwd=ROOT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.id: str | None = None

    def started(self) -> dict[str, int]:
        """The pids the test left, once it has reported them."""

        def reported() -> dict[str, Any] | None:
            if self.process.poll() is not None and not self.report.exists():
                raise AssertionError(f"the session ended first:\n{self.tail()}")
            return json.loads(self.report.read_text()) if self.report.exists() else None

        found = wait_until(reported, STARTED, "the test's processes", detail=self.tail)
        assert found is not None
        self.id = str(found["session"])
        pids: dict[str, int] = found["pids"]
        return pids

    def running(self, pids: dict[str, int]) -> list[int]:
        """What carries the session's id, once each of ``pids`` does (the test reports them
        right after starting them: give each a moment to show in ``/proc``)."""
        assert self.id is not None
        session = self.id

        def found() -> list[int]:
            running = reaper.marked(session)
            return running if set(pids.values()) <= set(running) else []

        return wait_until(
            found,
            ENDED,
            "every process the test left, carrying the session's id",
            detail=lambda: "\n".join(
                f"{n}: {p} {state(p)} {reaper.command(p)}" for n, p in pids.items()
            ),
        )

    def left(self) -> list[str]:
        """What is still alive of the session: what carries its id, and its watchdog (named
        with the id); each pid with its command line."""
        assert self.id is not None
        alive = set(reaper.marked(self.id)) | set(watchdogs(self.id))
        return [f"{pid} {reaper.command(pid)}" for pid in sorted(alive)]

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]

    def end(self) -> None:
        """Whatever happened: nothing of the session is left running."""
        with suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        if self.id is not None:
            reaper.reap(self.id)
            for pid in watchdogs(self.id):
                with suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


@contextmanager
def session(tmp_path: Path, test: str, *args: str, wait: bool) -> Iterator[Session]:
    found = Session(tmp_path, test, *args, wait=wait)
    try:
        yield found
    finally:
        found.end()


def state(pid: int) -> str:
    """The state letter ``/proc`` gives process ``pid`` (``S``, ``R``, ``Z`` for a zombie...)."""
    fields = reaper.stat(pid)
    return "(gone)" if fields is None else fields[0]


def watchdogs(session_id: str) -> list[int]:
    """The live watchdogs of session ``session_id`` (its id is on their command line)."""
    pids = (int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit())
    return [
        pid
        for pid in pids
        if "tests.reaper" in (found := reaper.command(pid)) and session_id in found.split()
    ]


def test_a_session_that_ends_leaves_none_of_its_processes_behind(tmp_path: Path) -> None:
    with session(tmp_path, "test_leaves_processes_behind", wait=False) as ran:
        assert ran.process.wait(timeout=STARTED) == 0, ran.tail()
        pids = ran.started()
        assert ran.id is not None
        assert ran.id != reaper.current()  # a session of its own
        # Gone by the time the session's process has ended: killed at its end, not later.
        assert [p for p in pids.values() if reaper.carries(p, ran.id)] == []
        wait_until(
            lambda: not ran.left(), ENDED, "the watchdog's end", detail=lambda: str(ran.left())
        )


def test_a_unit_test_that_leaves_a_process_running_fails_and_the_process_is_killed(
    tmp_path: Path,
) -> None:
    with session(tmp_path, "test_a_unit_test_that_leaves_a_process_running", wait=False) as ran:
        assert ran.process.wait(timeout=STARTED) == 1, ran.tail()
        child = ran.started()["child"]
        assert "a unit test leaves no process running; this one left [" in ran.tail()
        assert "time.sleep(600)" in ran.tail()
        assert not reaper.running(child), reaper.command(child)  # killed at its teardown


def test_a_session_killed_outright_has_its_processes_killed_by_its_watchdog(
    tmp_path: Path,
) -> None:
    with session(tmp_path, "test_leaves_processes_behind", wait=True) as ran:
        ran.running(ran.started())
        os.kill(ran.process.pid, signal.SIGKILL)  # no clean-up of its own runs
        ran.process.wait()
        wait_until(
            lambda: not ran.left(),
            ENDED,
            "the end of every process of the session",
            detail=lambda: "\n".join(ran.left()),
        )


@pytest.mark.spark
def test_an_interrupted_session_leaves_no_process_behind_and_touches_no_other_session(
    tmp_path: Path,
) -> None:
    """``make test`` stopped with Ctrl-C: two xdist workers, a Spark JVM (which ignores SIGINT
    and outlives a worker whose forked child keeps its stdin open), a child that ignores SIGINT,
    a daemon in a session of its own. Every one ends within seconds of the session's process;
    a process of this session (another id) lives on."""
    bystander = subprocess.Popen(
        [sys.executable, "-c", IGNORES_SIGINT],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        with session(
            tmp_path,
            "test_leaves_processes_and_a_spark_jvm_behind",
            *("-n", "2", "--dist", "loadfile"),
            wait=True,
        ) as ran:
            running = ran.running(ran.started())
            jvms = [p for p in running if reaper.command(p).split(" ", 1)[0].endswith("/java")]
            assert jvms, [reaper.command(p) for p in running]
            assert bystander.pid not in running
            os.killpg(ran.process.pid, signal.SIGINT)  # Ctrl-C: to the foreground group
            assert ran.process.wait(timeout=60) == pytest.ExitCode.INTERRUPTED, ran.tail()
            wait_until(
                lambda: not ran.left(),
                ENDED,
                "the end of every process of the interrupted session",
                detail=lambda: "\n".join(ran.left()),
            )
        assert bystander.poll() is None  # another session's: never signalled
        assert reaper.carries(bystander.pid, reaper.current())
    finally:
        bystander.kill()
        bystander.wait()
