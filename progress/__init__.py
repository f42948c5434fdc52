"""Progress tracking for logical epochs: times, path summaries, frontiers, graphs, trackers.

Pure Python: this package imports neither Spark nor Dagster. Only the ledger module (added
beside it) touches a database.
"""

from __future__ import annotations

from progress.antichain import Antichain, MutableAntichain
from progress.change_batch import ChangeBatch
from progress.errors import (
    ClosedHandleError,
    CycleError,
    DanglingPortError,
    DuplicateNodeError,
    EpochgateError,
    EpochNotReachedError,
    GraphError,
    HandleError,
    InvalidInputTimeError,
    InvalidSummaryError,
    InvalidTimeError,
    NothingToCorrectError,
    ProgressError,
    TimeRegressionError,
    UnknownLocationError,
    UnknownNodeError,
    UnknownPortError,
    WorkerError,
    WorkerMovedError,
)
from progress.graph import Graph, GraphBuilder, NodeSpec
from progress.handles import InputHandle, Probe, input_handle, probe
from progress.location import Location, Source, Target
from progress.summary import Delay, PathSummary, ProductSummary, identity_of
from progress.timestamp import MAX_EPOCH, Product, Time, less_equal, less_than, minimum_like
from progress.tracker import Blocker, Tracker, Update

__all__ = [
    "MAX_EPOCH",
    "Antichain",
    "Blocker",
    "ChangeBatch",
    "ClosedHandleError",
    "CycleError",
    "DanglingPortError",
    "Delay",
    "DuplicateNodeError",
    "EpochNotReachedError",
    "NothingToCorrectError",
    "EpochgateError",
    "Graph",
    "GraphBuilder",
    "GraphError",
    "HandleError",
    "InputHandle",
    "InvalidInputTimeError",
    "InvalidSummaryError",
    "InvalidTimeError",
    "Location",
    "MutableAntichain",
    "NodeSpec",
    "PathSummary",
    "Probe",
    "Product",
    "ProductSummary",
    "ProgressError",
    "Source",
    "Target",
    "Time",
    "TimeRegressionError",
    "Tracker",
    "UnknownLocationError",
    "UnknownNodeError",
    "UnknownPortError",
    "Update",
    "WorkerError",
    "WorkerMovedError",
    "identity_of",
    "input_handle",
    "less_equal",
    "less_than",
    "minimum_like",
    "probe",
]
