"""Whether a stage's output at an epoch is final, and what holds it back when it is not.

An epoch of a stage's output is **final** when nothing can change it any more: the frontier at
the stage's output has passed the epoch (no input worker can still send there and no run of the
stage is still to come there), and no re-run is pending for it (no output it depends on is
stale). ``Runtime.read`` returns only final epochs unless asked for what is committed now.

What holds an epoch back is said in the sentences ``status`` and ``blockers`` use
(``progress.sentences``): the workers of a source that still hold it, the runs still to come,
and the stale outputs whose re-run would change it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

from pipelines.errors import EpochNotCompleteError, PipelineError
from pipelines.stages.kinds import Stage
from progress import Source, Target, Time, Tracker, less_equal, sentences
from progress.ledger import Ledger

POLL_SECONDS = 0.5
"""How often a read that waits asks the ledger again."""


@dataclass(frozen=True)
class Finality:
    """The finality of the outputs of one pipeline's stages, as its ledger records it.
    ``above``: the stages each stage reads from, directly or not
    (``pipelines.run.revisions.above``)."""

    stages: Mapping[str, Stage]
    above: Mapping[str, frozenset[str]]
    ledger: Ledger
    pipeline: str

    def holds(self, stage: str, epoch: Time) -> list[str]:
        """What keeps ``stage``'s output at ``epoch`` from being final, one sentence per
        holder; none when it is final."""
        with self.ledger.session():  # one snapshot for every question
            tracker = self.ledger.tracker(self.pipeline)
            if tracker.frontier(Source(stage, 0)).less_equal(epoch):
                return self._still_to_come(stage, epoch, tracker)
            stale = self.ledger.stale(self.pipeline)
        return [
            sentences.stale_output(name, at)
            for name, at in stale
            if self.changes((name, at), stage, epoch)
        ]

    def closed(self, stage: str) -> bool:
        """Whether every epoch of ``stage``'s output is final but for re-runs: the frontier
        at its output is empty (every input worker above it has closed)."""
        return self.ledger.tracker(self.pipeline).frontier(Source(stage, 0)).is_empty()

    def stale_above(self, stage: str) -> list[tuple[str, Time]]:
        """The stale outputs of ``stage`` and of the stages above it: re-runs still to come."""
        return [
            (name, at)
            for name, at in self.ledger.stale(self.pipeline)
            if name == stage or name in self.above[stage]
        ]

    def wait(self, stage: str, epoch: Time, seconds: float) -> None:
        """Return once ``stage`` at ``epoch`` is final, asking the ledger again every
        ``POLL_SECONDS`` for up to ``seconds`` (its progress may come from other processes);
        then raise ``EpochNotCompleteError`` with what still holds it."""
        deadline = time.monotonic() + max(seconds, 0.0)
        while True:
            found = self.holds(stage, epoch)
            if not found:
                return
            left = deadline - time.monotonic()
            if left <= 0:
                raise EpochNotCompleteError(stage, epoch, found)
            time.sleep(min(POLL_SECONDS, left))

    def _still_to_come(self, stage: str, epoch: Time, tracker: Tracker) -> list[str]:
        """Why the frontier at ``stage``'s output has not passed ``epoch`` yet."""
        ledger, p = self.ledger, self.pipeline
        if self.stages[stage].is_source:
            found = [h.text for h in ledger.source_holds(p, stage, epoch, tracker=tracker)]
        else:
            found = [h.text for h in ledger.blockers(p, stage, epoch, tracker=tracker)]
            if not found and tracker.ready(stage, epoch):
                found = [sentences.stage_not_run(stage, epoch, _waiting(tracker, stage, epoch))]
        return found or [sentences.stage_holds(stage, epoch)]

    def changes(self, stale: tuple[str, Time], stage: str, epoch: Time) -> bool:
        """Whether re-running the stale output ``stale`` (a run of ``name`` at ``at``) can
        change ``stage``'s output at ``epoch``: it is ``stage`` or a stage above it, and its
        output reaches ``epoch`` (shifted by the delays on the way), or an earlier epoch when
        a stage on the way carries state from one epoch to the next."""
        name, at = stale
        if name != stage and name not in self.above[stage]:
            return False
        if not isinstance(at, int) or not isinstance(epoch, int):
            return less_equal(at, epoch)  # an inner scope's times: any earlier one may
        between = {stage, name} | {s for s in self.above[stage] if name in self.above[s]}
        if any(self.stages[s].holds_state for s in between):
            return at <= epoch
        return epoch - at in self._shifts(name, stage)

    def _shifts(self, name: str, stage: str) -> set[int]:
        """The delays a message of ``name`` gathers on its ways down to ``stage``'s output."""
        if stage == name:
            return {self.stages[name].delay}
        return {
            shift + self.stages[stage].delay
            for upstream in self.stages[stage].inputs
            if upstream == name or name in self.above.get(upstream, frozenset())
            for shift in self._shifts(name, upstream)
        }


def _waiting(tracker: Tracker, stage: str, epoch: Time) -> int:
    """Messages waiting at ``stage``'s inputs at exactly ``epoch``."""
    return sum(
        count
        for location, t, count in tracker.pointstamps()
        if isinstance(location, Target) and location.node == stage and t == epoch
    )


def wait_seconds(wait: float | bool) -> float:
    """``wait`` as seconds: ``False`` is none; ``True`` or a negative number is refused (say
    how long)."""
    if isinstance(wait, bool):
        if wait:
            raise PipelineError("wait= takes the seconds to wait for an epoch, not True")
        return 0.0
    if wait < 0:
        raise PipelineError(f"wait= takes the seconds to wait for an epoch, not {wait}")
    return float(wait)
