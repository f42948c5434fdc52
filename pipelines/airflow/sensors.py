"""``EpochReadySensor``: succeeds when a stage can run an epoch (its input frontier has passed
it) or, with ``final=True``, when the stage's output at the epoch is final. While it waits, each
poke logs what holds the epoch, in the words ``epochgate status`` uses; a timeout fails it with
them. ``deferrable=True`` hands the wait to ``EpochReadyTrigger`` in the triggerer."""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from airflow.sdk import BaseSensorOperator, Context
from airflow.sdk.exceptions import AirflowSensorTimeout

from pipelines.airflow.hooks import EpochgateHook
from pipelines.airflow.triggers import EpochReadyTrigger
from pipelines.airflow.waits import describe, epoch_waits

DEFER_SLACK = 60.0
"""Seconds the deferral outlives the trigger's own deadline: the trigger reports the holders."""


class EpochReadySensor(BaseSensorOperator):
    """Wait until ``stage`` of ``pipeline`` (a registered name or ``module:attribute``) can run
    ``epoch`` (templated), or is final there with ``final=True``."""

    template_fields: Sequence[str] = ("pipeline", "stage", "epoch")

    def __init__(
        self,
        *,
        pipeline: str,
        stage: str,
        epoch: int | str,
        final: bool = False,
        deferrable: bool = False,
        epochgate_conn_id: str = EpochgateHook.default_conn_name,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.pipeline, self.stage, self.epoch = pipeline, stage, epoch
        self.final, self.deferrable = final, deferrable
        self.epochgate_conn_id = epochgate_conn_id
        self.waits: list[str] = []

    def _check(self) -> list[str]:
        place = EpochgateHook(self.epochgate_conn_id).place()
        ledger = place.open_ledger()
        pipeline = place.pipeline(ledger, self.pipeline)
        return epoch_waits(pipeline, ledger, self.stage, int(self.epoch), final=self.final)

    def _said(self, waits: list[str]) -> str:
        return describe(self.pipeline, self.stage, int(self.epoch), waits, final=self.final)

    def poke(self, context: Context) -> bool:
        self.waits = self._check()
        if self.waits:
            self.log.info(self._said(self.waits))
        return not self.waits

    def execute(self, context: Context) -> Any:
        if not self.deferrable:
            try:
                return super().execute(context)
            except AirflowSensorTimeout as err:
                raise AirflowSensorTimeout(f"{err}: {self._said(self.waits)}") from err
        if self.poke(context):
            return None
        place = EpochgateHook(self.epochgate_conn_id).place()
        deadline = time.time() + float(self.timeout) if self.timeout else None
        self.defer(
            trigger=EpochReadyTrigger(
                pipeline=self.pipeline,
                stage=self.stage,
                epoch=int(self.epoch),
                place=place.as_kwargs(),
                final=self.final,
                poll=float(self.poke_interval),
                deadline=deadline,
            ),
            method_name="execute_complete",
            timeout=timedelta(seconds=float(self.timeout) + DEFER_SLACK) if self.timeout else None,
        )

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> None:
        """Where a deferred wait resumes: ready, or timed out naming the holders."""
        if event is None or event.get("status") != "ready":
            waits = list((event or {}).get("waits", ["the trigger ended without an answer"]))
            raise AirflowSensorTimeout(f"timed out: {self._said(waits)}")
        self.log.info(
            "%s epoch %s is %s", self.stage, self.epoch, "final" if self.final else "ready"
        )
