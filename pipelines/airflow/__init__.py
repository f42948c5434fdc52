"""epochgate under Apache Airflow 3 (the ``airflow`` extra): ``EpochReadySensor`` waits until an
epoch of a stage is ready or final, ``RunEpochOperator`` runs an epoch's stages and emits asset
events for the final ones (``epoch_asset``), ``final_epochs`` is an asset watched in the
triggerer (``EpochFinalTrigger``), ``EpochReadyTrigger`` waits there for a deferred sensor, and
``EpochgateHook`` reads the ``epochgate`` connection."""

from __future__ import annotations

from pipelines.airflow.assets import epoch_asset, final_epochs
from pipelines.airflow.hooks import EpochgateHook
from pipelines.airflow.operators import RunEpochOperator
from pipelines.airflow.sensors import EpochReadySensor
from pipelines.airflow.triggers import EpochFinalTrigger, EpochReadyTrigger

__all__ = [
    "EpochFinalTrigger",
    "EpochReadySensor",
    "EpochReadyTrigger",
    "EpochgateHook",
    "RunEpochOperator",
    "epoch_asset",
    "final_epochs",
]
