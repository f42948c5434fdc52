"""The order stale outputs are revised in: earliest first, except that a stage holding state
waits for the stale outputs upstream of it.

A stateful stage's revision from epoch e recomputes every later epoch from what its inputs hold
at that moment. Revised in plain epoch order, it would read inputs that a later revision of an
upstream stage replaces (``movements`` at epoch 1 after ``balances`` was revised from epoch 0),
and be stale again at once. So an output waits while a stage above it, not in a loop with it,
has a stale output that can still change what it reads: at any epoch for a stage holding state,
at its own epoch or earlier for the others. In a graph without loops some stale output never
waits (one of the stages nearest the sources); in a loop they are taken in epoch order.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from pipelines.errors import PipelineError
from pipelines.stages.families import followers
from pipelines.stages.kinds import Stage
from progress import Time, less_equal


def above(stages: Mapping[str, Stage], name: str) -> frozenset[str]:
    """The stages ``name`` reads from, directly or not, that are not in a loop with it."""
    found: set[str] = set()
    todo = list(stages[name].inputs)
    while todo:
        current = todo.pop()
        if current not in found:
            found.add(current)
            todo += stages[current].inputs
    return frozenset(found - {name, *followers(stages, name)})


def next_revision(
    stages: Mapping[str, Stage],
    stale: Sequence[tuple[str, Time]],
    upstream: Mapping[str, frozenset[str]] | None = None,
    revised: Collection[tuple[str, Time]] = (),
) -> tuple[str, Time]:
    """The stale output to revise first, of ``stale`` (in epoch order, upstream first): the
    first one that waits for none of the others (see the module docs), else the first.
    ``upstream`` gives ``above`` of each stage when it is known already. One in ``revised``
    (revised already by the caller, and stale again) raises ``PipelineError``: a cycle.

    >>> from pipelines.stages.kinds import SourceStage, StatefulStage, TransformStage
    >>> stages = {
    ...     "raw": SourceStage(name="raw", schema=None),
    ...     "moves": TransformStage(name="moves", inputs=("raw",), fn=None),
    ...     "sums": StatefulStage(name="sums", inputs=("moves",), key=("k",), schema=None,
    ...                           update=None),
    ... }
    >>> next_revision(stages, [("sums", 0), ("moves", 1)])
    ('moves', 1)
    >>> next_revision(stages, [("moves", 0), ("sums", 0)])
    ('moves', 0)
    """
    first = stale[0]
    for stage, epoch in stale:
        over = upstream[stage] if upstream is not None else above(stages, stage)
        carries = stages[stage].holds_state
        if not any(other in over and (carries or less_equal(at, epoch)) for other, at in stale):
            first = (stage, epoch)
            break
    if first in revised:
        raise PipelineError(
            f"stage {first[0]!r} epoch {first[1]} is still stale after it was revised: "
            "its output reads an attempt that is not current"
        )
    return first
