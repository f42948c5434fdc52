"""Epochs as Dagster partitions: one dynamic partitions definition per pipeline, sortable keys.

Epoch 7 is the partition key ``000000000007``: zero-padded to a fixed width, so keys sort in
epoch order in the UI, in run lists and in any string comparison.

>>> epoch_key(7)
'000000000007'
>>> key_epoch("000000000007")
7
"""

from __future__ import annotations

import dagster as dg

from progress import Time
from progress.errors import EpochgateError

KEY_WIDTH = 12
"""Digits of a partition key: room for any epoch up to 10**12 - 1."""


class EpochKeyError(EpochgateError, ValueError):
    """A partition key that is not an epoch key (``key``), or an epoch that has no key
    (``epoch``); nothing was run."""

    def __init__(self, message: str, *, key: str | None = None, epoch: object = None) -> None:
        self.key = key
        self.epoch = epoch
        super().__init__(message)


def epoch_key(epoch: Time) -> str:
    """The partition key of ``epoch`` (an int >= 0 below 10**12)."""
    if type(epoch) is not int or epoch < 0 or epoch >= 10**KEY_WIDTH:
        raise EpochKeyError(
            f"epoch {epoch!r} has no partition key: epochs are ints from 0 to {10**KEY_WIDTH - 1}",
            epoch=epoch,
        )
    return f"{epoch:0{KEY_WIDTH}d}"


def key_epoch(key: str) -> int:
    """The epoch of a partition key made by ``epoch_key``."""
    if len(key) != KEY_WIDTH or not key.isascii() or not key.isdigit():
        raise EpochKeyError(
            f"partition key {key!r} is not an epoch key: {KEY_WIDTH} digits, e.g. {epoch_key(7)!r}",
            key=key,
        )
    return int(key)


def partitions_name(pipeline: str) -> str:
    """The name of a pipeline's dynamic partitions definition (its epochs) in the instance."""
    return f"{pipeline}_epochs"


def epoch_partitions(pipeline: str) -> dg.DynamicPartitionsDefinition:
    """The partitions of a pipeline's assets: the epochs the frontier sensor has seen."""
    return dg.DynamicPartitionsDefinition(name=partitions_name(pipeline))
