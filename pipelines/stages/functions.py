"""The shapes of the functions a pipeline's stages are given: ordinary functions over DataFrames."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

Transform = Callable[["DataFrame"], "DataFrame"]
"""One epoch's input in, the stage's output out (a transform, an iterative stage's first round)."""

RoundStep = Callable[["DataFrame", "DataFrame"], "DataFrame"]
"""An iterative stage's round: ``step(state, input)`` is the next round's state."""

StateUpdate = Callable[["DataFrame", "DataFrame"], "DataFrame"]
"""A stateful stage's update: ``update(batch, state)`` is the new rows of the keys ``batch``
moved, from the epoch's input rows and those keys' rows in the state the epoch before left."""
