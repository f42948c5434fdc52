"""What an epoch of a stage still waits for, read from the ledger only (no Spark, nothing
written): its input (the stage can run the epoch once its input frontier has passed it) or, for
``final``, its output (nothing can change it any more). One sentence per holder, in the words
``epochgate status`` uses; none when the wait is over."""

from __future__ import annotations

from pipelines.cli.context import registrations
from pipelines.reads.final import Finality
from pipelines.run.revisions import above
from pipelines.stages.pipeline import Pipeline
from progress import sentences
from progress.ledger import Ledger


def epoch_waits(
    pipeline: Pipeline, ledger: Ledger, stage: str, epoch: int, *, final: bool = False
) -> list[str]:
    """What keeps ``stage`` at ``epoch`` from being ready (or, with ``final``, final)."""
    pipeline.stage(stage)  # an unknown name: the one error every entry point gives
    if pipeline.name not in {r.pipeline for r in registrations(ledger)}:
        return [sentences.not_registered(pipeline.name)]
    if final:
        reach = {name: above(pipeline.stages, name) for name in pipeline.stages}
        return Finality(pipeline.stages, reach, ledger, pipeline.name).holds(stage, epoch)
    return [h.text for h in ledger.blockers(pipeline.name, stage, epoch)]


def describe(pipeline: str, stage: str, epoch: int, waits: list[str], *, final: bool) -> str:
    """The line a waiting task logs: "pipeline shop, stage by_region, epoch 3 is not ready:
    source orders, worker 1, still holds epoch 3"."""
    state = "final" if final else "ready"
    return f"pipeline {pipeline}, stage {stage}, epoch {epoch} is not {state}: " + "; ".join(waits)
