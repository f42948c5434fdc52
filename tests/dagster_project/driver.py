"""The tests' view of the driver (``dagster_project.dev.driver``), and how they read a tick."""

from __future__ import annotations

import dagster as dg

from dagster_project.dev.driver import DriveError, Driver, LaunchedRun, requested

__all__ = ["Driver", "DriveError", "LaunchedRun", "requested", "skip_text"]


def skip_text(result: dg.SensorResult) -> str:
    """The skip reason of a tick that must not request anything."""
    assert not result.run_requests, f"requests: {requested(result)}"
    assert result.skip_reason is not None
    return result.skip_reason.skip_message or ""
