"""The Airflow asset of a stage's output: ``epoch_asset("shop", "by_region")`` is the asset whose
events a ``RunEpochOperator`` emits for each epoch it made final, with the epoch as the event's
partition key, so a DAG scheduled on it (``PartitionedAssetTimetable``) runs once per final
epoch."""

from __future__ import annotations

from airflow.sdk import Asset

SCHEME = "epochgate"


def epoch_asset(pipeline: str, stage: str) -> Asset:
    """The asset of ``stage``'s output in ``pipeline`` (``epochgate://PIPELINE/STAGE``)."""
    return Asset(name=f"{pipeline}.{stage}", uri=f"{SCHEME}://{pipeline}/{stage}")


def stage_of(asset: Asset, pipeline: str) -> str | None:
    """The stage ``asset`` is the output of in ``pipeline``, or None for another asset."""
    prefix = f"{SCHEME}://{pipeline}/"
    return asset.uri.removeprefix(prefix) if asset.uri.startswith(prefix) else None
