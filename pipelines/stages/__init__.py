"""Definitions: the pipeline, its streams and the stage kinds as plain specs, arguments and
clocks. Nothing here imports what runs a pipeline (``tests/test_layout.py`` checks it).

    from pipelines.stages import SourceStage, StatefulStage

Each kind is a frozen spec: its settings and the rules checked when a pipeline is defined.
What a kind does when it runs is the runtime's (``pipelines.run.kinds``).
"""

from __future__ import annotations

from pipelines.stages.aggregate import AggregateFunction, AggregateStage, Aggregation
from pipelines.stages.expectations import Expectation, OnFail
from pipelines.stages.functions import RoundStep, StateUpdate, Transform
from pipelines.stages.kinds import (
    DimensionStage,
    Feed,
    FeedbackStage,
    IterateStage,
    JoinStage,
    KeyedStage,
    SinkStage,
    SourceStage,
    Stage,
    StatefulStage,
    TransformStage,
    UnionStage,
)
from pipelines.stages.replayed import ReplayStage

__all__ = [
    "Stage",
    "Feed",
    "SourceStage",
    "DimensionStage",
    "ReplayStage",
    "TransformStage",
    "UnionStage",
    "JoinStage",
    "KeyedStage",
    "StatefulStage",
    "AggregateStage",
    "Aggregation",
    "AggregateFunction",
    "IterateStage",
    "FeedbackStage",
    "SinkStage",
    "Transform",
    "RoundStep",
    "StateUpdate",
    "Expectation",
    "OnFail",
]
