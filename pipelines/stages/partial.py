"""Partial state: which keyed stages keep only the keys that are read, and the rules that hold
them together.

A partial stage's materialization holds only its *present* keys; every other key is a *hole*.
Its epoch runs drop the input rows of holes (neither applied nor passed downstream), and a read
of a hole fills it with an upquery (``pipelines.reads.upquery``). Because its output omits holes,
only partial stages keyed on the same columns may read it (``pipelines.stages.families``)."""

from __future__ import annotations

from dataclasses import dataclass

from pipelines.errors import PipelineDefinitionError


@dataclass(frozen=True)
class PartialState:
    """Keep only the keys that are read. ``max_keys`` bounds the present keys: past it, the
    least recently read keys are evicted after each epoch run and each fill (None: no bound)."""

    max_keys: int | None = None


def partial_setting(pipeline: str, stage: str, value: object) -> PartialState | None:
    """The ``partial=`` argument of a keyed stage: False (full), True or a ``PartialState``."""
    if value is False or value is None:
        return None
    if value is True:
        return PartialState()
    if isinstance(value, PartialState):
        limit = value.max_keys
        if limit is not None and (type(limit) is not int or limit < 1):
            raise PipelineDefinitionError(
                pipeline,
                stage,
                "PartialState(max_keys=...) must be an int >= 1",
                argument="partial",
            )
        return value
    raise PipelineDefinitionError(
        pipeline,
        stage,
        f"partial must be True, False or PartialState(...): {value!r}",
        argument="partial",
    )
