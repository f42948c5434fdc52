"""The settings ``build_definitions`` reads from the environment when it is called.

Each applies only where its argument is not given: ``$EPOCHGATE_SENSOR_INTERVAL`` (the sensors'
interval) here, and the resources' ``$EPOCHGATE_SPARK``, ``$EPOCHGATE_LEDGER``,
``$EPOCHGATE_DATA`` and ``$EPOCHGATE_HOME`` (``SparkResource.from_settings``,
``LedgerResource.from_settings``). Nothing is read when a module is imported.
"""

from __future__ import annotations

import os

from dagster_project.sensors import DEFAULT_INTERVAL

SENSOR_INTERVAL_ENV = "EPOCHGATE_SENSOR_INTERVAL"
"""Seconds between two ticks of each frontier, upquery and replay sensor."""


def sensor_interval_setting() -> int:
    """``$EPOCHGATE_SENSOR_INTERVAL`` (whole seconds, at least 1), else 30."""
    text = os.environ.get(SENSOR_INTERVAL_ENV, "").strip()
    if not text:
        return DEFAULT_INTERVAL
    if not text.isascii() or not text.isdigit() or int(text) < 1:
        raise ValueError(
            f"{SENSOR_INTERVAL_ENV} must be a whole number of seconds, at least 1; got {text!r}"
        )
    return int(text)
