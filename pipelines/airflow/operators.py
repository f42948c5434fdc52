"""``RunEpochOperator``: runs a pipeline's stages of one epoch (``pipelines.run.epoch_runs``, what
``epochgate run --epoch`` runs) and emits an asset event for each of its outlets (``epoch_asset``)
whose stage's output at the epoch is final, with the epoch as the event's partition key. A stage
that fails, or an outlet's stage that is not final after the run, fails the task naming the
stage, the epoch and the cause; a failed stage commits nothing."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import Asset, BaseOperator, Context
from airflow.sdk.exceptions import AirflowFailException

from pipelines.airflow.assets import stage_of
from pipelines.airflow.hooks import EpochgateHook
from pipelines.airflow.waits import describe, epoch_waits
from pipelines.errors import PipelineError
from pipelines.run.epoch_runs import run_epoch


class RunEpochOperator(BaseOperator):
    """Run ``pipeline``'s stages (or ``stages``) at ``epoch`` (templated)."""

    template_fields: Sequence[str] = ("pipeline", "epoch")

    def __init__(
        self,
        *,
        pipeline: str,
        epoch: int | str,
        stages: Sequence[str] | None = None,
        epochgate_conn_id: str = EpochgateHook.default_conn_name,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.pipeline, self.epoch = pipeline, epoch
        self.stages = list(stages) if stages is not None else None
        self.epochgate_conn_id = epochgate_conn_id

    def execute(self, context: Context) -> dict[str, Any]:
        epoch = int(self.epoch)
        rt = EpochgateHook(self.epochgate_conn_id).place().runtime(self.pipeline)
        try:
            ran = run_epoch(rt, epoch, self.stages, lambda r: self.log.info(r.describe()))
        except PipelineError as err:
            raise AirflowFailException(str(err)) from err
        for stage, holds in ran.waiting.items():
            self.log.info("%s epoch %s waits: %s", stage, epoch, "; ".join(holds))
        name = rt.pipeline.name
        for outlet in self.outlets:
            found = stage_of(outlet, name) if isinstance(outlet, Asset) else None
            if found is None:
                continue
            waits = epoch_waits(rt.pipeline, rt.ledger, found, epoch, final=True)
            if waits:
                raise AirflowFailException(describe(name, found, epoch, waits, final=True))
            event = context["outlet_events"][outlet]
            event.extra = {"pipeline": name, "stage": found, "epoch": epoch}
            event.add_partitions(str(epoch))
        return {
            "epoch": epoch,
            "ran": [r.describe() for r in ran.results],
            "waiting": ran.waiting,
        }
