"""A child process the test expects to end (often killed at a fault point), in a process group
of its own: whatever is left of that group (its Spark JVM) is killed once it has ended."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path


def run_in_group(
    argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], timeout: float = 300.0
) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` to its end with its output captured; then SIGKILL what is left of its
    group, so no JVM of it outlives the test."""
    child = subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=dict(env),
        start_new_session=True,  # its JVM too: what is left of the group is killed below
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        out, err = child.communicate(timeout=timeout)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)
        child.wait()
    return subprocess.CompletedProcess(list(argv), child.returncode, out, err)


STAND_IN = "import time; print('up', flush=True); time.sleep(60)"


def stand_in(*args: str) -> subprocess.Popen[str]:
    """A process that sleeps with ``args`` on its command line (a server's pid reused by
    something else), returned once it says it runs: before its exec its command line and its
    descriptors are still this process's. Killed when it never says so."""
    child = subprocess.Popen(
        [sys.executable, "-c", STAND_IN, *args], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == "up\n"
    except BaseException:
        child.kill()
        child.wait()
        raise
    return child
