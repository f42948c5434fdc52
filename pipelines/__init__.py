"""Pipelines on Spark: the stage API, the per-epoch runtime, scheduled epochs and the errors.

What pipelines are written against:

    from pipelines import Pipeline, Runtime, spark_session

``pipelines.testing`` helps test them; ``pipelines.examples`` holds the shipped examples.
"""

from __future__ import annotations

from pipelines.aggregate import AggregateStage
from pipelines.clock import AfterEpochEnd, ClockError, CloseRule, DoneMarkers, EpochClock, Explicit
from pipelines.dataflow import Pipeline, Stream
from pipelines.errors import (
    BackfillIncompleteError,
    InputChangedError,
    InputValidationError,
    InvalidEpochError,
    PipelineDefinitionError,
    PipelineError,
    RunFailedError,
    StageFailedError,
    StageNotReadyError,
    StageWriteError,
    StateReadError,
)
from pipelines.inputs import SourceInput
from pipelines.lookup import Lookup, StateInfo
from pipelines.partial import PartialState
from pipelines.replay_source import ReplayStage
from pipelines.runtime import RunResult, RunStatus, Runtime
from pipelines.sinks import SinkPublishError
from pipelines.spark import SparkUnavailableError, spark_session
from pipelines.stages import (
    DimensionStage,
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
from progress.errors import (
    ClosedHandleError,
    EpochgateError,
    EpochNotReachedError,
    InvalidInputTimeError,
    LedgerFullError,
    LedgerLockLostError,
    LedgerMissingError,
    LedgerStorageError,
    LedgerUnwritableError,
    TimeRegressionError,
    WorkerError,
    WorkerMovedError,
)

__all__ = [
    # defining
    "Pipeline",
    "Stream",
    "Stage",
    "ReplayStage",
    "SourceStage",
    "DimensionStage",
    "TransformStage",
    "UnionStage",
    "JoinStage",
    "KeyedStage",
    "StatefulStage",
    "AggregateStage",
    "PartialState",
    "IterateStage",
    "FeedbackStage",
    "SinkStage",
    # scheduled epochs
    "EpochClock",
    "CloseRule",
    "Explicit",
    "AfterEpochEnd",
    "DoneMarkers",
    # running
    "Runtime",
    "RunResult",
    "RunStatus",
    "SourceInput",
    "Lookup",
    "StateInfo",
    "spark_session",
    # errors
    "EpochgateError",
    "PipelineError",
    "PipelineDefinitionError",
    "InputValidationError",
    "InputChangedError",
    "InvalidEpochError",
    "StageNotReadyError",
    "StageFailedError",
    "StageWriteError",
    "StateReadError",
    "RunFailedError",
    "BackfillIncompleteError",
    "SinkPublishError",
    "WorkerError",
    "TimeRegressionError",
    "ClosedHandleError",
    "InvalidInputTimeError",
    "WorkerMovedError",
    "EpochNotReachedError",
    "ClockError",
    "SparkUnavailableError",
    "LedgerStorageError",
    "LedgerFullError",
    "LedgerUnwritableError",
    "LedgerMissingError",
    "LedgerLockLostError",
]
