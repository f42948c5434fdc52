"""Transforms that are not materialized (``materialize=False``): recomputed inside each stage
that reads them, never written, like an ephemeral model.

Such a transform still runs once per epoch and commits a message, so readiness, frontiers and
lineage are what they are for any stage; its message holds no data (no Spark job: one ledger
commit). A stage reading it reads the transform's own input (``base``: the nearest stage above
it that is materialized) and applies the transform's function (each one of a chain, in order)
inside its own run. The reader records as read both the transform's message and the base's
messages, so a revision of either makes it stale, and its re-run reads the current ones:
exactly once holds as for a written message.

Only stages that read their input as a DataFrame may read one; a stage whose input files are
read directly (a keyed stage: the state store reads its keys from them, and a partial stage's
upqueries re-read them at every epoch) is refused when the pipeline is defined, and so is a
capture of one (a capture records data files).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from pipelines.errors import PipelineDefinitionError
from pipelines.stages import Stage, TransformStage

if TYPE_CHECKING:
    from pipelines.iteration import Transform


def base(
    stages: Mapping[str, Stage], name: str
) -> tuple[str, tuple[str, ...], tuple[Transform, ...]]:
    """For a stage ``name`` that is read: the stage whose written messages hold the data
    (``name`` itself unless it is not materialized), the transforms that are not materialized
    between them (from the base down to ``name``), and their functions, in the order they
    apply.

    A materialized stage is its own base: ``(name, (), ())``."""
    chain: list[TransformStage] = []
    stage = stages[name]
    while isinstance(stage, TransformStage) and not stage.materialize:
        chain.append(stage)
        stage = stages[stage.inputs[0]]
    chain.reverse()
    return stage.name, tuple(s.name for s in chain), tuple(s.fn for s in chain)


def check_reader(pipeline: str, reader: Stage, upstream: Stage) -> None:
    """Refuse ``reader`` reading ``upstream`` when ``upstream`` is not materialized and
    ``reader`` needs its input's files."""
    if upstream.materialize:
        return
    if reader.holds_state or reader.partial is not None:
        raise PipelineDefinitionError(
            pipeline,
            reader.name,
            f"{reader.kind} stage {reader.name!r} reads transform {upstream.name!r}, which is "
            "not materialized (materialize=False): a keyed stage reads its input's files "
            f"(its keys, and its upqueries' history); materialize {upstream.name!r}",
            argument="input",
        )
