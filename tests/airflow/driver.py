"""A child process that runs DAGs with ``dag.test()`` against the Airflow home its environment
names (``AIRFLOW_HOME``, a migrated SQLite database): one run per line of JSON on stdin,
``{"file": DAG_FILE, "dag": DAG_ID, "conf": {...}}``, each answered on stdout with a line
``RESULT {"state": ..., "tasks": {task_id: state}}`` after the run's own log lines. The line
``{"providers": true}`` is answered with what Airflow's providers manager found of epochgate:
``RESULT {"provider": ..., "hook": ..., "triggers": [MODULE, ...]}``.

    python -m tests.airflow.driver

One process for every run of a test: Airflow is imported, and Spark started, once."""

from __future__ import annotations

import json
import runpy
import sys
from pathlib import Path
from typing import Any

RESULT = "RESULT "


def run(file: str, dag_id: str, conf: dict[str, Any]) -> dict[str, Any]:
    folder = str(Path(file).parent)
    if folder not in sys.path:  # as Airflow puts its DAG folder on the path
        sys.path.insert(0, folder)
    found = runpy.run_path(file)
    dags = [d for d in found.values() if getattr(d, "dag_id", None) == dag_id]
    if not dags:
        raise SystemExit(f"no DAG {dag_id!r} in {file}")
    dag_run = dags[0].test(run_conf=conf)
    tasks = {ti.task_id: str(ti.state) for ti in dag_run.get_task_instances()}
    return {"state": str(dag_run.state), "tasks": tasks, "run_id": dag_run.run_id}


def providers() -> dict[str, Any]:
    """epochgate as Airflow's providers manager finds it (from the package's entry point)."""
    from airflow.providers_manager import ProvidersManager

    manager = ProvidersManager()
    found = manager.providers.get("epochgate")
    hook = manager.hooks.get("epochgate")
    return {
        "provider": None if found is None else found.data["package-name"],
        "hook": None if hook is None else hook.hook_class_name,
        "triggers": sorted(
            t.trigger_class_name for t in manager.trigger if t.package_name == "epochgate"
        ),
    }


def main() -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        asked = json.loads(line)
        if asked.get("providers"):
            print(RESULT + json.dumps(providers()), flush=True)
            continue
        answer = run(asked["file"], asked["dag"], asked.get("conf", {}))
        print(RESULT + json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
