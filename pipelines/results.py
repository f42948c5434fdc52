"""What a stage run did: its status, rows, time and rounds, as reported to callers."""

from __future__ import annotations

from dataclasses import dataclass

from progress import Time
from progress.run_status import RunStatus

__all__ = ["RunResult", "RunStatus"]


@dataclass(frozen=True)
class RunResult:
    """What one stage run did."""

    stage: str
    epoch: Time
    status: RunStatus
    attempt: str | None = None
    rows: int = 0
    seconds: float = 0.0
    rounds: int = 0
    """For an iterative stage: the rounds this run computed."""

    def describe(self) -> str:
        if self.status is RunStatus.DONE_ALREADY:
            return f"{self.stage} epoch {self.epoch}: {self.status}"
        what = "revised, " if self.status is RunStatus.REVISED else ""
        rounds = f" ({self.rounds} rounds)" if self.rounds else ""
        return (
            f"{self.stage} epoch {self.epoch}: {what}{self.rows} rows in {self.seconds:.2f}s"
            f"{rounds}"
        )
