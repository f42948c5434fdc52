"""The DAG files under ``dags/`` import Airflow, which makes ``$AIRFLOW_HOME`` when imported:
only the driver child imports them (with its own home), never the test process."""

from __future__ import annotations

collect_ignore = ["dags"]
