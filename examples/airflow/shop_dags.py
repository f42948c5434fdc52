"""The DAGs of the Airflow how-to.

``shop_epochs`` (triggered with ``{"epoch": N}``) waits in the triggerer until ``by_region`` can
run epoch N (every input worker has sent it), runs the epoch's stages and emits an event of the
asset ``shop.by_region`` with N as its partition key. ``shop_report`` is scheduled on that asset:
it runs once per final epoch, never for one that is still incomplete. ``shop_final`` is
scheduled on ``final_epochs``, an asset the triggerer watches: it gets an event for each epoch of
``by_region`` that becomes final, however it was run (this DAG, the command line, Dagster)."""

from __future__ import annotations

from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG, PartitionedAssetTimetable

from pipelines.airflow import EpochReadySensor, RunEpochOperator, epoch_asset, final_epochs

BY_REGION = epoch_asset("shop", "by_region")
FINAL = final_epochs("shop", "by_region", poll=1)

with DAG("shop_epochs", schedule=None, params={"epoch": 0}) as dag:
    wait = EpochReadySensor(
        task_id="wait",
        pipeline="shop",
        stage="by_region",
        epoch="{{ params.epoch }}",
        deferrable=True,
        poke_interval=5,
        timeout=3600,
    )
    run = RunEpochOperator(
        task_id="run", pipeline="shop", epoch="{{ params.epoch }}", outlets=[BY_REGION]
    )
    wait >> run

with DAG("shop_report", schedule=PartitionedAssetTimetable(assets=BY_REGION)) as report:
    EmptyOperator(task_id="report")  # the epoch is {{ dag_run.partition_key }}

with DAG("shop_final", schedule=FINAL) as final:
    # the epochs are in {{ triggering_asset_events }}: one or more (events that came close
    # together start one run), each event's extra["payload"]["epoch"]
    EmptyOperator(task_id="report")
