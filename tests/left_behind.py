"""Tests that leave processes behind, each in the way that escapes the usual clean-ups, for
``tests/test_reaper.py`` to run in a pytest session of their own and end it (not collected by
the suite: the file's name does not start with ``test_``).

Each writes ``$LEFT_BEHIND_REPORT`` (JSON: its session's id and the pids it left) once its
processes run; with ``$LEFT_BEHIND_WAIT`` set it then waits to be interrupted.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests import reaper

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

REPORT_ENV = "LEFT_BEHIND_REPORT"
WAIT_ENV = "LEFT_BEHIND_WAIT"

pytestmark = pytest.mark.skipif(
    REPORT_ENV not in os.environ, reason="run by tests/test_reaper.py, which reads the report"
)
IGNORES_SIGINT = (
    "import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); time.sleep(600)"
)
"""A process that Ctrl-C does not stop (as a Spark JVM)."""
DAEMON = f"import os; os.setsid(); {IGNORES_SIGINT}"
"""The same, in a session of its own (no terminal's signal reaches it)."""


def leave_processes() -> dict[str, int]:
    """Start a child that ignores SIGINT, an orphan (its parent, a shell, exits at once: it
    belongs to the first process then) in a session of its own, and a forked copy of this
    process in a session of its own that ignores SIGINT and keeps every descriptor of this
    one open (a Spark JVM's stdin among them, when there is one); their pids."""
    child = subprocess.Popen(
        [sys.executable, "-c", IGNORES_SIGINT],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    command = f"{shlex.quote(sys.executable)} -c {shlex.quote(DAEMON)}"
    shell = subprocess.run(
        ["sh", "-c", f"{command} </dev/null >/dev/null 2>&1 & echo $!"],
        capture_output=True,
        text=True,
        check=True,
    )
    forked = os.fork()
    if forked == 0:
        os.setsid()
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        time.sleep(600)  # the point: it lives on until killed
        os._exit(0)
    return {"child": child.pid, "orphan": int(shell.stdout), "forked": forked}


def report(pids: dict[str, int]) -> None:
    """Write the report at once whole (a reader never sees half of it); then, when asked,
    wait to be interrupted."""
    path = Path(os.environ[REPORT_ENV])
    written = path.with_name(path.name + ".tmp")
    written.write_text(json.dumps({"session": reaper.current(), "pids": pids}))
    written.rename(path)
    if os.environ.get(WAIT_ENV):
        time.sleep(600)  # the point: the session is inside this test when it is ended


def test_leaves_processes_behind() -> None:
    report(leave_processes())


def test_leaves_processes_and_a_spark_jvm_behind(spark: SparkSession) -> None:
    assert spark.range(3).count() == 3
    report(leave_processes())


@pytest.mark.unit
def test_a_unit_test_that_leaves_a_process_running() -> None:
    """Fails at its teardown (``tests/conftest.py``): a unit test leaves no process running."""
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)"], stdin=subprocess.DEVNULL
    )
    report({"child": child.pid})
