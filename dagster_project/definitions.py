"""The factory that turns registered pipelines into Dagster ``Definitions``."""

from __future__ import annotations

import dagster as dg


def build_definitions() -> dg.Definitions:
    """Definitions for the registered pipelines (none are registered yet)."""
    return dg.Definitions()


defs = build_definitions()
"""What ``workspace.yaml`` loads."""
