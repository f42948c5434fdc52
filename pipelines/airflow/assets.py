"""The Airflow assets of a stage's output.

``epoch_asset("shop", "by_region")`` is the asset whose events a ``RunEpochOperator`` emits for
each epoch it made final, with the epoch as the event's partition key, so a DAG scheduled on it
(``PartitionedAssetTimetable``) runs once per final epoch. ``final_epochs("shop", "by_region")``
is an asset watched in the triggerer (``EpochFinalTrigger``): it gets an event for each epoch of
the stage that becomes final, however it was run (the command line, Dagster, another DAG), the
epoch in the event's ``extra["payload"]``."""

from __future__ import annotations

from airflow.sdk import Asset, AssetWatcher

from pipelines.airflow.hooks import EpochgateHook
from pipelines.airflow.triggers import EpochFinalTrigger

SCHEME = "epochgate"
FINAL = "final"
"""The last part of the URI of a ``final_epochs`` asset."""


def epoch_asset(pipeline: str, stage: str) -> Asset:
    """The asset of ``stage``'s output in ``pipeline`` (``epochgate://PIPELINE/STAGE``)."""
    return Asset(name=f"{pipeline}.{stage}", uri=f"{SCHEME}://{pipeline}/{stage}")


def final_epochs(
    pipeline: str,
    stage: str,
    *,
    epochgate_conn_id: str = EpochgateHook.default_conn_name,
    after: int = -1,
    poll: float = 5.0,
) -> Asset:
    """An asset (``epochgate://PIPELINE/STAGE/final``) with a watcher that sends an event for
    each epoch of ``stage`` that becomes final after ``after``, asking the ledger every ``poll``
    seconds. A DAG scheduled on it is not partitioned (Airflow gives a watcher's events no
    partition key): its run reads the epochs from ``triggering_asset_events``, one or more."""
    trigger = EpochFinalTrigger(
        pipeline=pipeline,
        stage=stage,
        epochgate_conn_id=epochgate_conn_id,
        after=after,
        poll=poll,
    )
    name = f"{pipeline}.{stage}.{FINAL}"
    return Asset(
        name=name,
        uri=f"{SCHEME}://{pipeline}/{stage}/{FINAL}",
        watchers=[AssetWatcher(name=name, trigger=trigger)],
    )


def stage_of(asset: Asset, pipeline: str) -> str | None:
    """The stage ``asset`` is the output of in ``pipeline`` (an ``epoch_asset``), or None for
    another asset."""
    prefix = f"{SCHEME}://{pipeline}/"
    rest = asset.uri.removeprefix(prefix)
    return rest if asset.uri.startswith(prefix) and "/" not in rest else None
