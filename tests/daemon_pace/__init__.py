"""The suite's ``dagster dev`` daemons with short loops (``sitecustomize``): ``paced(env)``."""

from __future__ import annotations

import os
from pathlib import Path

HERE = Path(__file__).resolve().parent


def paced(env: dict[str, str]) -> dict[str, str]:
    """``env`` with this directory first on ``PYTHONPATH``: a daemon started with it loops
    every second or two instead of every 5 s (sensors) and 30 s (backfills)."""
    path = [str(HERE), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    return {**env, "PYTHONPATH": os.pathsep.join(path)}
