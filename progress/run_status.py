"""How a stage's run stands or ended: one status, as the ledger records it and callers are told."""

from __future__ import annotations

from enum import StrEnum

STOPS_RUN = "fail"
"""The action of an expectation whose failing rows stop the run (``OnFail.FAIL``), as the
ledger records it with the run's failure."""


class RunStatus(StrEnum):
    """A run's status. The ledger records ``RUNNING`` when a run starts and ``SUCCEEDED``,
    ``DONE_ALREADY`` or ``FAILED`` when it ends; ``run_stage`` tells its caller ``SUCCEEDED``,
    ``REVISED`` (a revision's run) or ``DONE_ALREADY`` (nothing to do, or another process
    committed the same run first: this one's output is not seen).

    >>> RunStatus("done-already") is RunStatus.DONE_ALREADY
    True
    >>> RunStatus("skipped") is RunStatus.DONE_ALREADY  # as ledgers before it recorded it
    True
    """

    RUNNING = "running"
    SUCCEEDED = "succeeded"
    REVISED = "revised"
    DONE_ALREADY = "done-already"
    FAILED = "failed"

    @classmethod
    def _missing_(cls, value: object) -> RunStatus | None:
        return cls.DONE_ALREADY if value == "skipped" else None
