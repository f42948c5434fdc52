"""Waits that run in Airflow's triggerer, holding no worker slot.

``EpochReadyTrigger`` fires once: when the epoch is ready (or final), or, at its deadline, with
what still holds it. ``EpochFinalTrigger`` is an event trigger for an asset watcher: it fires
once for each epoch of a stage that becomes final after ``after`` (one event per epoch, the
epoch in its payload), so a DAG scheduled on the watched asset starts on final epochs only."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseEventTrigger, BaseTrigger, TriggerEvent

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


class EpochFinalTrigger(BaseEventTrigger):
    """For an ``AssetWatcher``: an event for each epoch of ``stage`` that is final, from the
    epoch after ``after`` on, in epoch order (each event's payload holds its epoch)."""

    def __init__(
        self,
        *,
        pipeline: str,
        stage: str,
        place: dict[str, Any],
        after: int = -1,
        poll: float = 5.0,
    ) -> None:
        super().__init__()
        self.pipeline, self.stage, self.place = pipeline, stage, place
        self.after, self.poll = int(after), poll

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            _classpath(self),
            {
                "pipeline": self.pipeline,
                "stage": self.stage,
                "place": self.place,
                "after": self.after,
                "poll": self.poll,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        place = Place(**self.place)
        epoch = self.after + 1
        while True:
            waits = await asyncio.to_thread(_waits, place, self.pipeline, self.stage, epoch, True)
            if waits:
                await asyncio.sleep(self.poll)
                continue
            yield TriggerEvent({"pipeline": self.pipeline, "stage": self.stage, "epoch": epoch})
            epoch += 1
