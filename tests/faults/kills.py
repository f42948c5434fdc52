"""Kill a child running one action (``tests.faults.child``): at a fault point it arms, or after
a delay; then make sure its whole process group (its Spark JVM) is gone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from progress.faults import FAULT_ENV
from tests.faults.scenario import Home
from tests.waiting import within

REPO = Path(__file__).resolve().parents[2]
KILLED = -signal.SIGKILL


@dataclass(frozen=True)
class Outcome:
    """How a child ended: killed (by its fault point, or by the delay), or finished."""

    returncode: int
    stderr: str
    seconds: float
    group_left: bool
    """Whether a process of its group (its JVM) outlived it by more than the grace period."""

    @property
    def killed(self) -> bool:
        return self.returncode == KILLED

    def killed_at(self, point: str) -> bool:
        return self.killed and f"epochgate fault: killed at {point} " in self.stderr


def run_child(
    home: Home,
    action: str,
    *args: str,
    fault: str | None = None,
    delay: float | None = None,
    timeout: float = 300.0,
) -> Outcome:
    """Run ``action`` in a child with ``fault`` armed (``POINT[:N]``), or SIGKILL its process
    group after ``delay`` seconds; wait until it ends."""
    env = {k: v for k, v in os.environ.items() if k != FAULT_ENV}
    if fault is not None:
        env[FAULT_ENV] = fault
    log = home.root / f"child-{time.monotonic_ns()}.log"
    started = time.monotonic()
    with log.open("w") as err:
        child = subprocess.Popen(
            [sys.executable, "-m", "tests.faults.child", str(home.root), action, *args],
            cwd=REPO,
            env=env,
            start_new_session=True,  # its JVM is in its group: the group outliving it shows
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
        try:
            child.wait(timeout=delay if delay is not None else timeout)
        except subprocess.TimeoutExpired:
            if delay is None:
                os.killpg(child.pid, signal.SIGKILL)
                child.wait()
                raise
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
    seconds = time.monotonic() - started
    return Outcome(child.returncode, log.read_text(), seconds, not _group_gone(child.pid))


def _group_gone(pgid: int, grace: float = 20.0) -> bool:
    """Wait up to ``grace`` seconds for every process of group ``pgid`` to end; kill what is
    left after that (and say so)."""
    if within(lambda: not _group_alive(pgid), grace, every=0.1):
        return True
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        return True
    return False


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True
