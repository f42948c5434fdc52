"""The ledger check of a stage's epoch: done, one committed output, current input, sound counts.

A stage's asset check passes for an epoch when the ledger shows that the stage ran the epoch,
that its current output messages come from one commit, that the inputs it read are still the
current ones (no revision has made it stale), and that the ledger's counts agree with its log.
"""

from __future__ import annotations

from dataclasses import dataclass

import dagster as dg

from dagster_project.names import LEDGER_CHECK, stage_key
from pipelines.stages.pipeline import Pipeline
from progress import Time
from progress.ledger import Ledger, VerifyReport

DESCRIPTION = (
    "The ledger agrees with this epoch: the stage ran it, its output is one commit, the input "
    "it read is still current, and the ledger's counts match its log of batches."
)


@dataclass(frozen=True)
class LedgerCheck:
    """What the ledger says about one ``(stage, epoch)``."""

    stage: str
    epoch: Time
    done: bool
    messages: int
    commits: int
    stale: bool
    verify: VerifyReport

    @property
    def passed(self) -> bool:
        return not self.problems()

    def problems(self) -> list[str]:
        """What is wrong, in plain words (nothing when the check passes)."""
        out: list[str] = []
        if not self.done:
            out.append(f"{self.stage} has not run epoch {self.epoch}")
        if self.done and not self.messages:
            out.append(f"{self.stage} has no current output message at epoch {self.epoch}")
        if self.commits > 1:
            out.append(
                f"its current output at epoch {self.epoch} comes from {self.commits} commits"
            )
        if self.stale:
            out.append(f"an input it read at epoch {self.epoch} was revised since: it is stale")
        if not self.verify.ok:
            out.extend(self.verify.lines()[1:-1])  # the differences, without the tally
        return out

    def result(self, pipeline: str) -> dg.AssetCheckResult:
        problems = self.problems()
        return dg.AssetCheckResult(
            passed=self.passed,
            asset_key=stage_key(pipeline, self.stage),
            check_name=LEDGER_CHECK,
            severity=dg.AssetCheckSeverity.ERROR,
            description="; ".join(problems) if problems else None,
            metadata={
                "epoch": dg.MetadataValue.text(str(self.epoch)),
                "done": self.done,
                "current_messages": self.messages,
                "commits": self.commits,
                "stale": self.stale,
                "ledger_batches_checked": self.verify.batches,
                "ledger_counts_ok": self.verify.ok,
            },
        )


def check_stage(
    ledger: Ledger,
    pipeline: Pipeline,
    stage: str,
    epoch: Time,
    verify: VerifyReport | None = None,
) -> LedgerCheck:
    """Check ``(stage, epoch)`` in the ledger; pass ``verify`` to share one count check."""
    p = pipeline.name
    with ledger.session():
        done = epoch in ledger.done_epochs(p, stage)
        messages = ledger.message(p, stage, 0, pipeline.stage(stage).output_time(epoch))
        stale = (stage, epoch) in ledger.stale(p)
        report = verify if verify is not None else ledger.verify()
    commits = len({m.batch_id for m in messages})
    return LedgerCheck(stage, epoch, done, len(messages), commits, stale, report)


def check_spec(pipeline: str, stage: str) -> dg.AssetCheckSpec:
    return dg.AssetCheckSpec(
        LEDGER_CHECK, asset=stage_key(pipeline, stage), description=DESCRIPTION
    )
