"""One epoch of a pipeline: its stages at that epoch (all, or those named), upstream first, each
run once when its input is complete, as ``Runtime.run_stage`` runs it (a done stage whose input
was revised since is revised). What ``epochgate run --epoch`` and Airflow's
``RunEpochOperator`` do."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pipelines.errors import StageNotReadyError
from pipelines.results import RunResult, RunStatus
from pipelines.run.runtime import Runtime


@dataclass(frozen=True)
class EpochRun:
    """What running an epoch did: each stage's result, and the stages it could not run yet with
    what holds each (``Runtime.blockers``' sentences)."""

    epoch: int
    results: list[RunResult] = field(default_factory=list)
    waiting: dict[str, list[str]] = field(default_factory=dict)


def run_epoch(
    rt: Runtime,
    epoch: int,
    stages: Sequence[str] | None = None,
    on_result: Callable[[RunResult], None] | None = None,
) -> EpochRun:
    """Run ``stages`` (default: every stage that is not a source) of ``rt``'s pipeline at
    ``epoch``, upstream first. A stage whose input is not complete is left waiting, and so are
    those below it; a stage that fails raises ``StageFailedError`` with nothing of it committed
    (the stages run before it stay committed)."""
    wanted = [rt.pipeline.stage(s).name for s in stages] if stages is not None else None
    done = EpochRun(epoch)
    for name, spec in rt.pipeline.stages.items():
        if spec.is_source or (wanted is not None and name not in wanted):
            continue
        try:
            result = rt.run_stage(name, epoch)
            if result.status is RunStatus.DONE_ALREADY and (name, epoch) in rt.stale():
                revised = rt.revise(name, [epoch])
                result = revised[0] if revised else result
        except StageNotReadyError as err:
            done.waiting[name] = list(err.holds) or ["its input is not complete"]
            continue
        done.results.append(result)
        if on_result is not None:
            on_result(result)
    return done
