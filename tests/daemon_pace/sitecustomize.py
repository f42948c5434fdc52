"""Imported at the start of every Python process that has this directory on its path (the
processes of a ``dagster dev`` the suite starts: ``tests.dagster_project.dagster_dev``). In
Dagster's daemon, it shortens the loops' fixed waits: the sensor loop waits at least 5 s between
its looks at the sensors and the backfill loop 30 s between its iterations, so a scenario under
the daemon spends most of its time waiting for them. The suite's daemons look every
``SENSOR_LOOP`` and ``BACKFILL_LOOP`` seconds; what they do at each look is Dagster's own.

Elsewhere it does nothing but import the ``sitecustomize`` it shadows, if there is one."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys

DAEMON = ["-m", "dagster._daemon"]
"""How ``dagster dev`` starts its daemon (after the interpreter's path)."""
SENSOR_LOOP = 1
BACKFILL_LOOP = 2


def pace() -> None:
    """Shorten the daemon's loops (before they start: the backfill loop reads its wait once)."""
    from dagster._daemon import controller, sensor

    for module, name, seconds in (
        (controller, "DEFAULT_DAEMON_INTERVAL_SECONDS", BACKFILL_LOOP),
        (sensor, "MIN_INTERVAL_LOOP_TIME", SENSOR_LOOP),
    ):
        if not hasattr(module, name):  # tests/test_daemon_pace.py names it
            raise RuntimeError(f"{module.__name__}.{name} is gone: the daemon cannot be paced")
        setattr(module, name, seconds)


def shadowed() -> None:
    """Run the ``sitecustomize`` that this one hides on the path, if any."""
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


def is_daemon(argv: list[str]) -> bool:
    """Whether ``argv`` (a process's ``sys.orig_argv``) starts Dagster's daemon."""
    return argv[1:3] == DAEMON


if is_daemon(sys.orig_argv):
    pace()
shadowed()
