"""The Airflow tests' own DAGs beside the how-to's: an operator without a sensor before it
(``run_only``), a sensor in poke mode with a short timeout (``poke_wait``), a deferred sensor
waiting for a final epoch with a short timeout (``final_wait``), and the run of a pipeline whose
stage fails (``broken_run``)."""

from __future__ import annotations

from airflow.sdk import DAG

from pipelines.airflow import EpochReadySensor, RunEpochOperator, epoch_asset

with DAG("run_only", schedule=None, params={"epoch": 0}) as run_only:
    RunEpochOperator(
        task_id="run",
        pipeline="shop",
        epoch="{{ params.epoch }}",
        outlets=[epoch_asset("shop", "by_region")],
    )

with DAG("poke_wait", schedule=None, params={"epoch": 0}) as poke_wait:
    EpochReadySensor(
        task_id="wait",
        pipeline="shop",
        stage="by_region",
        epoch="{{ params.epoch }}",
        poke_interval=1,
        timeout=3,
    )

with DAG("final_wait", schedule=None, params={"epoch": 0}) as final_wait:
    EpochReadySensor(
        task_id="wait",
        pipeline="shop",
        stage="by_region",
        epoch="{{ params.epoch }}",
        final=True,
        deferrable=True,
        poke_interval=1,
        timeout=3,
    )

with DAG("broken_run", schedule=None, params={"epoch": 0}) as broken_run:
    RunEpochOperator(task_id="run", pipeline="broken", epoch="{{ params.epoch }}")
