"""Stages that are not materialized (``materialize=False``: a transform, or a join): recomputed
inside each stage that reads them, never written, like an ephemeral model.

Such a stage still runs once per epoch and commits a message, so readiness, frontiers and
lineage are what they are for any stage; its message holds no data (no Spark job: one ledger
commit). A stage reading it reads the inputs of the nearest materialized stages above it (its
``bases``: one for a chain of transforms, one per side for a join) and recomputes it from them
inside its own run. The reader records as read both the messages of the stages not materialized
and the bases' messages, so a revision of either makes it stale, and its re-run reads the
current ones: exactly once holds as for a written message.

Only stages that read their input as a DataFrame may read one; a stage whose input files are
read directly (a keyed stage: the state store reads its keys from them, and a partial stage's
upqueries re-read them at every epoch) is refused when the pipeline is defined, and so is a
capture of one (a capture records data files).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pipelines.run.work import Build
from pipelines.stages.kinds import Columns, JoinStage, Stage, TransformStage
from progress import Time

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


@dataclass(frozen=True)
class Derivation:
    """How a stage that reads ``name`` gets it: the stages whose written messages hold the data
    (``bases``), the stages not materialized between them and ``name`` (their messages are read
    too), and how the frame is recomputed from the bases' (``None``: the one base as it is)."""

    bases: tuple[str, ...]
    chain: tuple[str, ...]
    build: Build | None

    def apply(
        self, frames: Sequence[DataFrame], columns: Sequence[Columns], epoch: Time
    ) -> DataFrame:
        """The input, from one frame per base (with its columns, where known)."""
        return frames[0] if self.build is None else self.build(frames, columns, epoch)


def derivation(stages: Mapping[str, Stage], name: str) -> Derivation:
    """How ``name`` is read (see ``Derivation``). A materialized stage is its own base.

    >>> from pipelines.stages.kinds import TransformStage
    >>> stages = {
    ...     "a": TransformStage(name="a", fn=lambda df: df),
    ...     "b": TransformStage(name="b", inputs=("a",), fn=lambda df: df, materialize=False),
    ... }
    >>> derivation(stages, "b").bases, derivation(stages, "b").chain
    (('a',), ('b',))
    >>> derivation(stages, "a").build is None
    True
    """
    stage = stages[name]
    if stage.materialize or not isinstance(stage, TransformStage | JoinStage):
        return Derivation((name,), (), None)
    parts = [derivation(stages, upstream) for upstream in stage.inputs]
    bases = tuple(b for part in parts for b in part.bases)
    chain = (*(c for part in parts for c in part.chain), name)
    recompute = stage.recompute

    def build(frames: Sequence[DataFrame], columns: Sequence[Columns], epoch: Time) -> DataFrame:
        inputs: list[DataFrame] = []
        known: list[Columns] = []  # a part recomputed here: its columns are not known
        at = 0
        for part in parts:
            end = at + len(part.bases)
            inputs.append(part.apply(frames[at:end], columns[at:end], epoch))
            known.append(columns[at] if part.build is None else None)
            at = end
        return recompute(inputs, epoch, known)

    return Derivation(bases, chain, build)
