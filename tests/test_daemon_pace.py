"""The suite's daemons are paced (``tests.daemon_pace``): the waits it shortens are still where
it sets them in the installed Dagster, only a daemon's are shortened, and a ``sitecustomize``
it hides still runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.daemon_pace import HERE, paced
from tests.daemon_pace.sitecustomize import BACKFILL_LOOP, SENSOR_LOOP
from tests.environment import without_settings

SHOW = (
    "from dagster._daemon import controller, sensor; "
    "print(controller.DEFAULT_DAEMON_INTERVAL_SECONDS, sensor.MIN_INTERVAL_LOOP_TIME)"
)
PACE = (
    f"import sys; sys.path.insert(0, {str(HERE)!r}); import sitecustomize; sitecustomize.pace(); "
)


def shown(env: dict[str, str], code: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.split()


def test_only_a_daemon_has_its_loops_shortened(tmp_path: Path) -> None:
    env = without_settings()
    assert shown(env, SHOW) == ["30", "5"]  # Dagster's own waits, where the pace sets them
    assert shown(paced(env), SHOW) == ["30", "5"]  # not a daemon: unchanged
    assert shown(env, PACE + SHOW) == [str(BACKFILL_LOOP), str(SENSOR_LOOP)]
    code = "import sitecustomize; print(sitecustomize.is_daemon(sys.orig_argv))"
    argv = [sys.executable, "-m", "dagster._daemon", "run"]
    assert shown(
        paced(env), f"import sys; import sitecustomize; print(sitecustomize.is_daemon({argv!r}))"
    ) == ["True"]
    assert shown(paced(env), f"import sys; {code}") == ["False"]


def test_a_sitecustomize_it_hides_still_runs(tmp_path: Path) -> None:
    (tmp_path / "sitecustomize.py").write_text("import builtins; builtins.HIDDEN_RAN = True\n")
    env = paced({**without_settings(), "PYTHONPATH": str(tmp_path)})
    assert shown(env, "import builtins; print(getattr(builtins, 'HIDDEN_RAN', False))") == ["True"]
