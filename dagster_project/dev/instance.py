"""A Dagster instance directory with the project's settings (``dagster_project/dagster.yaml``):
the one ``make demo`` and ``make ui`` use, and those the tests and benchmarks start."""

from __future__ import annotations

import shutil
from pathlib import Path

from pipelines.settings import DAGSTER_DIR, absolute, state_dir

INSTANCE_DIR = DAGSTER_DIR
"""The Dagster instance's directory under the state directory."""
INSTANCE_CONFIG = Path(__file__).resolve().parents[1] / "dagster.yaml"
"""The project's instance settings (shipped with the package): the ``spark`` pool's limit, the
run queue, the warm run launcher."""


def instance_home(state: Path | None = None) -> Path:
    """The Dagster instance directory under ``state`` (default: the state directory), created
    with the project's ``dagster.yaml`` in it when it has none (an existing one is left as the
    user made it)."""
    home = absolute((state or state_dir()) / INSTANCE_DIR)
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    if not config.exists():
        shutil.copyfile(INSTANCE_CONFIG, config)
    return home
