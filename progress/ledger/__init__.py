"""The durable progress ledger: the one part of ``progress`` that does I/O (a DuckDB file)."""

from __future__ import annotations

from progress.ledger.captures import CaptureRecord, StreamHead, StreamMessage, StreamSnapshot
from progress.ledger.engine import release_all
from progress.ledger.records import (
    BatchRecord,
    CheckEntry,
    CheckRecord,
    CommitResult,
    CountDifference,
    Failure,
    History,
    Hold,
    MessageEntry,
    MessageRecord,
    MessageRef,
    Origin,
    OriginKind,
    PartialBatch,
    PendingUpquery,
    QuarantineRecord,
    Registration,
    RunKind,
    RunRecord,
    StageStatus,
    VerifyReport,
)
from progress.ledger.schema import VERSION as SCHEMA_VERSION
from progress.ledger.store import DEFAULT_PATH, Ledger
from progress.scope import scope_name

__all__ = [
    "DEFAULT_PATH",
    "SCHEMA_VERSION",
    "BatchRecord",
    "CaptureRecord",
    "CheckEntry",
    "CheckRecord",
    "CommitResult",
    "CountDifference",
    "Failure",
    "History",
    "Hold",
    "Ledger",
    "MessageEntry",
    "MessageRecord",
    "MessageRef",
    "Origin",
    "OriginKind",
    "PartialBatch",
    "PendingUpquery",
    "QuarantineRecord",
    "Registration",
    "RunKind",
    "RunRecord",
    "StageStatus",
    "StreamHead",
    "StreamMessage",
    "StreamSnapshot",
    "VerifyReport",
    "release_all",
    "scope_name",
]
