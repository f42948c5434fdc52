"""Expectations: what good data is, per stage, checked on every epoch it produces.

An expectation is a Spark SQL boolean expression over a stage's output columns (a row passes
when it is true; false or NULL fails it), or ``unique=`` columns (a row fails when another row
of the same epoch has the same values in them). ``on_fail`` says what a failing row does:

* ``warn``: nothing; the output is committed unchanged and the counts are recorded.
* ``drop``: it is kept out of the committed output, in the stage's quarantine for that epoch
  (``Runtime.read(stage, epoch, quarantine=True)``). Only for kinds whose output is written as
  computed, row for row (``Stage.drops_rows``): a stateful stage's output is its state.
* ``fail``: nothing is committed; the run fails naming the expectation (a source refuses the
  send), and what reads the stage waits until a correction or a code change makes it pass.

Every expectation of a stage is checked on every row the run produced, before any is dropped.
This module holds the definitions and their rules; checking them is the runtime's
(``pipelines.run.expectations``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum

from pipelines.errors import PipelineDefinitionError
from pipelines.stages.arguments import check_name
from pipelines.stages.kinds import Feed, Stage
from progress.run_status import STOPS_RUN


class OnFail(StrEnum):
    """What a row that fails an expectation does (see the module docs)."""

    WARN = "warn"
    DROP = "drop"
    FAIL = STOPS_RUN


@dataclass(frozen=True)
class Expectation:
    """One expectation of stage ``stage``: ``condition`` (SQL), or ``unique`` columns."""

    stage: str
    name: str
    condition: str | None
    unique: tuple[str, ...]
    on_fail: OnFail

    def describe(self) -> str:
        """What it asks, in a line (``cents > 0``; ``unique (order_id)``)."""
        if self.condition is not None:
            return self.condition
        return f"unique ({', '.join(self.unique)})"


def expectation(
    pipeline: str,
    stage: Stage,
    name: str,
    *,
    condition: object,
    unique: object,
    on_fail: object,
    columns: tuple[str, ...] | None,
    taken: Sequence[str],
) -> Expectation:
    """An expectation of ``stage`` checked against the rules of a definition: ``name`` an
    identifier not ``taken`` yet on the stage, one of ``condition`` (a non-empty string) and
    ``unique`` (column names, each one of ``columns`` when those are known), ``on_fail`` one of
    ``OnFail``, and a stage whose kind can take it."""

    def refuse(reason: str, argument: str) -> PipelineDefinitionError:
        return PipelineDefinitionError(pipeline, stage.name, reason, argument=argument)

    try:
        check_name(pipeline, name, "expectation")
    except PipelineDefinitionError as err:
        raise refuse(err.reason, "name") from None
    if name in taken:
        raise refuse(f"an expectation named {name!r} exists on the stage", "name")
    try:
        action = OnFail(str(on_fail))
    except ValueError:
        allowed = ", ".join(repr(a.value) for a in OnFail)
        raise refuse(f"on_fail must be one of {allowed}, not {on_fail!r}", "on_fail") from None
    if stage.fed_by is Feed.REPLAY:
        raise refuse(
            "a replayed source takes no expectation: its data was checked where it was "
            "captured; expect on a stage that reads it",
            "stage",
        )
    if not stage.materialize:
        raise refuse(
            "a stage that is not materialized takes no expectation: it is never written; "
            "expect on a stage that reads it, or materialize it",
            "stage",
        )
    if action is OnFail.DROP and not stage.drops_rows:
        raise refuse(
            f"on_fail='drop' needs a stage whose output is written row for row; a {stage.kind} "
            "stage's is not (use 'warn' or 'fail', or drop the rows before it)",
            "on_fail",
        )
    if (condition is None) == (unique is None):
        raise refuse("give a condition (SQL) or unique= columns, one of the two", "condition")
    if condition is not None:
        if not isinstance(condition, str) or not condition.strip():
            raise refuse(
                f"condition must be a SQL boolean expression, not {condition!r}", "condition"
            )
        return Expectation(stage.name, name, condition.strip(), (), action)
    problem, names = _unique(unique, columns)
    if problem is not None:
        raise refuse(problem, "unique")
    return Expectation(stage.name, name, None, names, action)


def _unique(unique: object, columns: tuple[str, ...] | None) -> tuple[str | None, tuple[str, ...]]:
    """The ``unique=`` columns as a tuple, or what is wrong with them."""
    if isinstance(unique, str):
        unique = (unique,)
    if (
        not isinstance(unique, Sequence)
        or not unique
        or not all(isinstance(c, str) and c for c in unique)
    ):
        return f"unique must be a list of column names, not {unique!r}", ()
    names = tuple(unique)
    if len(set(names)) != len(names):
        return f"unique names a column twice: {list(names)}", names
    missing = [c for c in names if columns is not None and c not in columns]
    if missing:
        return (
            f"unique names {', '.join(map(repr, missing))}, not a column of the stage "
            f"(its columns: {', '.join(columns or ())})"
        ), names
    return None, names


def check_freshness(pipeline: str, stage: Stage, within: object) -> timedelta:
    """A stage's freshness: a positive ``timedelta``, on a stage with output epochs."""
    if not isinstance(within, timedelta) or within <= timedelta(0):
        raise PipelineDefinitionError(
            pipeline,
            stage.name,
            f"within must be a positive timedelta, not {within!r}",
            argument="within",
        )
    if not stage.outputs:
        raise PipelineDefinitionError(
            pipeline,
            stage.name,
            "a sink has no epochs of its own to fall behind with: give the freshness to the "
            "stage it publishes",
            argument="stage",
        )
    return within
