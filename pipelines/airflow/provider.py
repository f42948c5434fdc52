"""Airflow's provider entry point (``apache_airflow_provider``): the ``epochgate`` connection
type and the provider's classes."""

from __future__ import annotations

from typing import Any

MODULES = {
    "hooks": "pipelines.airflow.hooks",
    "sensors": "pipelines.airflow.sensors",
    "operators": "pipelines.airflow.operators",
    "triggers": "pipelines.airflow.triggers",
}


def get_provider_info() -> dict[str, Any]:
    hook = "pipelines.airflow.hooks.EpochgateHook"
    info: dict[str, Any] = {
        "package-name": "epochgate",
        "name": "epochgate",
        "description": "Exact batch epochs on Spark: sensors that wait on frontiers, operators "
        "that run epochs",
        "connection-types": [{"connection-type": "epochgate", "hook-class-name": hook}],
        "integrations": [{"integration-name": "epochgate"}],
    }
    for kind, module in MODULES.items():
        info[kind] = [{"integration-name": "epochgate", "python-modules": [module]}]
    return info
