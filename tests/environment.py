"""The environment a test gives a process it starts: this one without epochgate's settings (a
command under test reads only what the test sets), except the machine's JVM settings that the
suite sets for every JVM it starts (``tests/conftest.py``)."""

from __future__ import annotations

import os

from pipelines.spark.jvm import ARCHIVE_ENV, OPTIONS_ENV

KEPT = (ARCHIVE_ENV, OPTIONS_ENV)


def without_settings(*prefixes: str) -> dict[str, str]:
    """``os.environ`` without the variables starting with ``EPOCHGATE_`` (or ``prefixes``,
    when given), keeping ``KEPT``."""
    dropped = prefixes or ("EPOCHGATE_",)
    return {k: v for k, v in os.environ.items() if k in KEPT or not k.startswith(dropped)}
