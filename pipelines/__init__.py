"""Pipelines on Spark with exact logical time: what a pipeline is written and run with.

    from pipelines import Pipeline, Runtime, spark_session

Everything else has one home: every error in ``pipelines.errors``, the stage kinds in
``pipelines.stages``, the kit for testing your own pipelines in ``pipelines.testing`` and the
shipped examples in ``pipelines.examples``.
"""

from __future__ import annotations

from pipelines.errors import EpochgateError, PipelineDefinitionError, PipelineError
from pipelines.reads.lookup import Lookup, StateInfo
from pipelines.reads.subscription import Completed
from pipelines.results import RunResult, RunStatus
from pipelines.run.expectations import ExpectationResult
from pipelines.run.runtime import Runtime
from pipelines.spark.session import spark_session
from pipelines.stages.clock import AfterEpochEnd, CloseRule, DoneMarkers, EpochClock, Explicit
from pipelines.stages.partial import PartialState
from pipelines.stages.pipeline import Pipeline, Stream
from progress.ledger import Ledger

__all__ = [
    # defining
    "Pipeline",
    "Stream",
    "PartialState",
    # scheduled epochs
    "EpochClock",
    "CloseRule",
    "Explicit",
    "AfterEpochEnd",
    "DoneMarkers",
    # running
    "Runtime",
    "Ledger",
    "spark_session",
    "RunResult",
    "RunStatus",
    "Lookup",
    "StateInfo",
    "Completed",
    "ExpectationResult",
    # the roots of every error (each one is in pipelines.errors)
    "EpochgateError",
    "PipelineError",
    "PipelineDefinitionError",
]
