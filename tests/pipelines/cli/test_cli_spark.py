"""The command line starts Spark only when a command needs it, and a Spark error is one line.

Each command runs in a child process (the suite's own session stays the only Spark in the
pytest process) that reports, after the command, whether it has a JVM gateway: PySpark opens
one exactly when it starts a JVM.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from pipelines.settings import HOME_ENV
from tests.environment import without_settings
from tests.fixtures.clicks import BROKEN, REFERENCE, write_clicks, write_mistyped

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[3]
PROBE = """
import sys
from pipelines.cli.main import main

code = main(sys.argv[1:])
pyspark = sys.modules.get("pyspark")
started = pyspark is not None and pyspark.SparkContext._gateway is not None
print(f"probe: spark started: {started}", file=sys.stderr)
sys.exit(code)
"""


@dataclass(frozen=True)
class Ran:
    code: int
    out: str
    errors: list[str]
    """stderr's lines, without the probe's."""
    spark_started: bool


def epochgate(home: Path, *argv: str) -> Ran:
    env = without_settings()
    env[HOME_ENV] = str(home)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *argv],
        env=env,
        cwd=home.parent,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    lines = done.stderr.splitlines()
    assert lines, done.stdout[-2000:]
    assert lines[-1].startswith("probe: spark started: "), done.stderr[-2000:]
    return Ran(done.returncode, done.stdout, lines[:-1], lines[-1].endswith("True"))


def test_sending_checked_files_advancing_and_status_start_no_jvm(tmp_path: Path) -> None:
    home = tmp_path / "home"
    good = write_clicks(tmp_path / "good.parquet", [(1, "home"), (2, "about")])
    bad = write_mistyped(tmp_path / "bad.parquet")

    sent = epochgate(home, "send", "-p", REFERENCE, "clicks", str(good))
    assert (sent.code, sent.errors, sent.spark_started) == (0, [], False)
    refused = epochgate(home, "send", "clicks", str(bad), "--worker", "1")
    assert refused.code == 1
    (error,) = refused.errors
    assert error.startswith(
        f"epochgate: pipeline 'clicks', source 'clicks', worker 1, epoch 0, file {bad}, "
        "column 'click_id'"
    )
    assert error.endswith("; nothing was committed")
    assert not refused.spark_started
    for argv in (("run",), ("advance", "clicks", "1"), ("close", "clicks"), ("status",)):
        ran = epochgate(home, *argv)  # run: nothing is ready yet, so there is nothing to run
        assert (ran.code, ran.errors, ran.spark_started) == (0, [], False), argv


def test_a_failing_stage_is_one_line_without_spark_json(tmp_path: Path) -> None:
    home = tmp_path / "home"
    file = write_clicks(tmp_path / "c.parquet", [(1, "home")])
    assert epochgate(home, "send", "-p", BROKEN, "clicks", str(file)).code == 0
    assert epochgate(home, "close", "clicks").code == 0
    ran = epochgate(home, "run")
    assert ran.spark_started  # the probe sees a JVM when there is one
    assert ran.code == 1
    assert ran.errors[-1].startswith(
        "epochgate: stage 'pick', epoch 0 failed: [UNRESOLVED_COLUMN.WITH_SUGGESTION] "
    )
    assert ran.errors[-1].endswith("; nothing was committed")
    # PySpark's query-context logger would print the error again as a JSON block.
    assert not [line for line in ran.errors if "{" in line or "ERROR" in line]
