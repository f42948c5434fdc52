"""A subscription whose stage closes while it gives epochs: it ends after the last epoch with a
message, not giving empty epochs past it forever (every epoch is final once all closed)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import pytest

from pipelines.reads.subscription import follow

pytestmark = pytest.mark.unit


@dataclass
class Message:
    time: int
    attempt: str


@dataclass
class ClosingLedger:
    epochs: int

    def messages(self, pipeline: str, stage: str, port: int) -> list[Message]:
        return [Message(e, f"a{e}") for e in range(self.epochs)]


@dataclass
class ClosingFinality:
    """Every epoch final; the stage closes right after the subscription first asks."""

    ledger: ClosingLedger
    pipeline: str = "p"
    asked: list[str] = field(default_factory=list)

    def closed(self, stage: str) -> bool:
        self.asked.append("closed")
        return self.asked.count("closed") > 1

    def holds(self, stage: str, epoch: int) -> list[str]:
        return []

    def stale_above(self, stage: str) -> list[tuple[str, int]]:
        return []


def test_a_stage_closed_between_two_questions_ends_the_subscription_at_its_last_epoch() -> None:
    finality: Any = ClosingFinality(ClosingLedger(epochs=3))
    read: Any = lambda epoch: epoch  # noqa: E731 (what is read does not matter here)
    given = follow(finality, "s", read, poll=0.0, timeout=5)
    epochs = [done.epoch for done in itertools.islice(given, 10)]
    assert epochs == [0, 1, 2]
