"""Families of partial stages: who may read a partial stage, and the stages that move together.

A partial stage's output omits its holes, so only partial stages keyed on the same columns may
read it (``check_reader``); together they form a *family* with one root, the partial stage whose
input is full. One right to change state covers the whole family (``lock_name``): an epoch run,
a fill and an eviction of any of its stages never interleave, and no two of them wait on each
other in opposite orders. A fill climbs the ``chain`` above a stage; an eviction follows the key
to its ``followers``.
"""

from __future__ import annotations

from collections.abc import Mapping

from pipelines.errors import PipelineDefinitionError
from pipelines.stages.kinds import DimensionStage, Stage


def check_reader(pipeline: str, reader: Stage, upstream: Stage) -> None:
    """Refuse ``reader`` reading ``upstream`` where it could not read it exactly: partial state
    stays below partial state keyed alike (a partial stage's output omits the keys that were
    never read), a partial stage reads a stream and not a dimension's table, and a stage that
    needs its input's files does not read a stage that is not materialized."""
    _check_materialized(pipeline, reader, upstream)
    if reader.partial is not None and isinstance(upstream, DimensionStage):
        raise PipelineDefinitionError(
            pipeline,
            reader.name,
            f"a partial stage cannot read dimension source {upstream.name!r} (its table as "
            "of each epoch is not a stream of rows to fill keys from); make it full",
            argument="partial",
        )
    if upstream.partial is None:
        return
    if reader.partial is None:
        what = "full stage" if reader.holds_state else f"full stage (a {reader.kind})"
        raise PipelineDefinitionError(
            pipeline,
            reader.name,
            f"partial stage {upstream.name!r} feeds {what} {reader.name!r}: its output omits "
            "keys that were never read",
            argument="partial",
        )
    if reader.key != upstream.key:
        raise PipelineDefinitionError(
            pipeline,
            reader.name,
            f"partial stage {upstream.name!r} (keyed on {', '.join(upstream.key)}) feeds "
            f"partial stage {reader.name!r} keyed on {', '.join(reader.key)}: partial stages "
            "must share their key",
            argument="key",
        )


def _check_materialized(pipeline: str, reader: Stage, upstream: Stage) -> None:
    """Refuse ``reader`` reading ``upstream`` when ``upstream`` is not materialized and
    ``reader`` needs its input's files."""
    if upstream.materialize:
        return
    if reader.holds_state or reader.partial is not None:
        raise PipelineDefinitionError(
            pipeline,
            reader.name,
            f"{reader.kind} stage {reader.name!r} reads {upstream.kind} {upstream.name!r}, "
            "which is not materialized (materialize=False): a keyed stage reads its input's files "
            f"(its keys, and its upqueries' history); materialize {upstream.name!r}",
            argument="input",
        )


def family_root(stages: Mapping[str, Stage], name: str) -> str:
    """The partial stage whose input is full, above ``name`` (itself for a root or a stage
    that is not partial)."""
    stage = stages[name]
    while stage.partial is not None and stage.inputs and stages[stage.inputs[0]].partial:
        stage = stages[stage.inputs[0]]
    return stage.name


def chain(stages: Mapping[str, Stage], name: str) -> list[str]:
    """``name`` and the partial stages above it, nearest first, up to its family's root."""
    out = [name]
    while out[-1] != family_root(stages, out[-1]):
        out.append(stages[out[-1]].inputs[0])
    return out


def followers(stages: Mapping[str, Stage], name: str) -> list[str]:
    """The stages that read ``name``'s output, directly or not (for a partial stage: the
    partial stages keyed like it below it), upstream first."""
    out: list[str] = []
    frontier = [name]
    while frontier:
        current = frontier.pop(0)
        for stage in stages.values():
            if current in stage.inputs and stage.name not in out and stage.name != name:
                out.append(stage.name)
                frontier.append(stage.name)
    return out


def lock_name(stages: Mapping[str, Stage], name: str) -> str:
    """Whose right to change state a run of ``name`` takes: its family root's, for a partial
    stage (see the module docs); its own otherwise."""
    return family_root(stages, name)
