"""Waits that run in Airflow's triggerer, holding no worker slot.

``EpochReadyTrigger`` fires once: when the epoch is ready (or final), or, at its deadline, with
what still holds it. ``EpochFinalTrigger`` is an event trigger for an asset watcher
(``pipelines.airflow.assets.final_epochs``): it fires once for each epoch of a stage that becomes
final, in epoch order, the epoch in its payload, and keeps the last epoch it sent in Airflow's
asset state store, so a restarted triggerer goes on after it instead of sending every epoch
again."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseEventTrigger, BaseTrigger, TriggerEvent

from pipelines.airflow.hooks import EpochgateHook
from pipelines.airflow.place import Place
from pipelines.airflow.waits import epoch_waits


def _classpath(trigger: BaseTrigger) -> str:
    """Where the triggerer finds ``trigger``'s class."""
    return f"{type(trigger).__module__}.{type(trigger).__qualname__}"


def _waits(place: Place, pipeline: str, stage: str, epoch: int, final: bool) -> list[str]:
    ledger = place.open_ledger()
    return epoch_waits(place.pipeline(ledger, pipeline), ledger, stage, epoch, final=final)


class EpochReadyTrigger(BaseTrigger):
    """Fires when ``stage`` of ``pipeline`` can run ``epoch`` (``final``: its output there is
    final), asking the ledger every ``poll`` seconds; at ``deadline`` (a Unix time) it fires
    with what still holds the epoch."""

    def __init__(
        self,
        *,
        pipeline: str,
        stage: str,
        epoch: int,
        place: dict[str, Any],
        final: bool = False,
        poll: float = 5.0,
        deadline: float | None = None,
    ) -> None:
        super().__init__()
        self.pipeline, self.stage, self.epoch = pipeline, stage, int(epoch)
        self.place, self.final, self.poll, self.deadline = place, final, poll, deadline

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            _classpath(self),
            {
                "pipeline": self.pipeline,
                "stage": self.stage,
                "epoch": self.epoch,
                "place": self.place,
                "final": self.final,
                "poll": self.poll,
                "deadline": self.deadline,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        place = Place(**self.place)
        while True:
            waits = await asyncio.to_thread(
                _waits, place, self.pipeline, self.stage, self.epoch, self.final
            )
            if not waits:
                yield TriggerEvent({"status": "ready", "epoch": self.epoch})
                return
            if self.deadline is not None and time.time() >= self.deadline:
                yield TriggerEvent({"status": "timeout", "epoch": self.epoch, "waits": waits})
                return
            self.log.info("%s epoch %s waits: %s", self.stage, self.epoch, "; ".join(waits))
            await asyncio.sleep(self.poll)


SENT = "epochgate.sent"
"""The key, in the watched asset's state store, of the last epoch an ``EpochFinalTrigger`` sent."""


class EpochFinalTrigger(BaseEventTrigger):
    """For an ``AssetWatcher``: an event for each epoch of ``stage`` that is final, from the
    epoch after ``after`` (or after the last one sent, kept in the watched asset's state store)
    on, in epoch order, asking the ledger every ``poll`` seconds. The ledger is the one the
    connection ``epochgate_conn_id`` names, read in the triggerer (not when the DAG is parsed)."""

    def __init__(
        self,
        *,
        pipeline: str,
        stage: str,
        epochgate_conn_id: str = EpochgateHook.default_conn_name,
        after: int = -1,
        poll: float = 5.0,
    ) -> None:
        super().__init__()
        self.pipeline, self.stage, self.epochgate_conn_id = pipeline, stage, epochgate_conn_id
        self.after, self.poll = int(after), poll

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            _classpath(self),
            {
                "pipeline": self.pipeline,
                "stage": self.stage,
                "epochgate_conn_id": self.epochgate_conn_id,
                "after": self.after,
                "poll": self.poll,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        place = await asyncio.to_thread(EpochgateHook(self.epochgate_conn_id).place)
        sent = await self._sent()
        epoch = max(self.after, -1 if sent is None else sent) + 1
        if sent is not None:
            self.log.info(
                "%s: the last epoch sent was %s; going on from %s", self.stage, sent, epoch
            )
        while True:
            waits = await asyncio.to_thread(_waits, place, self.pipeline, self.stage, epoch, True)
            if waits:
                await asyncio.sleep(self.poll)
                continue
            yield TriggerEvent({"pipeline": self.pipeline, "stage": self.stage, "epoch": epoch})
            await self._remember(epoch)
            epoch += 1

    async def _sent(self) -> int | None:
        """The last epoch sent, from the watched asset's state store (None: none yet, or no
        store: a trigger run outside an asset watcher)."""
        if self.asset_state_store is None:
            return None
        found = await self.asset_state_store.aget(SENT)
        return None if found is None else int(str(found))

    async def _remember(self, epoch: int) -> None:
        if self.asset_state_store is not None:
            await self.asset_state_store.aset(SENT, epoch)
