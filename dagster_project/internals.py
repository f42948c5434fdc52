"""The parts of Dagster's private modules the project uses, imported here and nowhere else.

A Dagster upgrade that moves one of them breaks this module only: the backfill statuses (which
backfills are in progress), the run launcher interface and its configuration, and the body of
``dagster api execute_run`` that a warm run worker calls for each run.
"""

from __future__ import annotations

from dagster._cli.api import _execute_run_command_body as execute_run_body
from dagster._config.config_schema import UserConfigSchema
from dagster._core.execution.backfill import BulkActionStatus
from dagster._core.instance import InstanceRef
from dagster._core.launcher.base import (
    CheckRunHealthResult,
    LaunchRunContext,
    RunLauncher,
    WorkerStatus,
)
from dagster._serdes import ConfigurableClass, ConfigurableClassData

__all__ = [
    "BulkActionStatus",
    "CheckRunHealthResult",
    "ConfigurableClass",
    "ConfigurableClassData",
    "InstanceRef",
    "LaunchRunContext",
    "RunLauncher",
    "UserConfigSchema",
    "WorkerStatus",
    "execute_run_body",
]
