"""``epochgate check``: a pipeline validated without running it, shown as a tree of its stages.

Exit 0 prints the stages and edges as a tree (each stage with its kind, key, delay and the
columns derived over empty inputs); exit 1 lists every problem found
(``pipelines.cli.validation``), or the one error of a module that fails to import or define
its pipeline. Deriving columns needs a Spark session (``--spark``, local by default); nothing
is run, sent or registered (only where the code of a pipeline registered with the same graph
is, when ``-p`` gives it).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

from pipelines.cli.context import chosen, remember, settings
from pipelines.cli.options import Commands, command, engine
from pipelines.cli.validation import validate
from pipelines.run.storage import runtime_home
from pipelines.spark.session import quiet_session
from pipelines.stages.kinds import SinkStage, Stage
from pipelines.stages.pipeline import Pipeline

if TYPE_CHECKING:
    from pyspark.sql.types import StructType


def describe(stage: Stage, columns: StructType | None) -> str:
    """A stage in one line: its name, kind, key and delay, what else sets it apart, and its
    columns when they are known before data."""
    details = [stage.kind, f"key: {', '.join(stage.key) or '-'}", f"delay: {stage.delay}"]
    if stage.is_source:
        details.append(f"workers: {stage.workers}")
    if stage.partial is not None:
        details.append("partial")
    if not stage.materialize:
        details.append("not materialized")
    if isinstance(stage, SinkStage):
        details.append(f"path: {stage.path}")
    shown = f"{stage.name}  [{', '.join(details)}]"
    if columns is not None and stage.outputs:
        shown += f"  columns: {', '.join(columns.fieldNames())}"
    return shown


def tree(pipeline: Pipeline, columns: Mapping[str, StructType | None]) -> list[str]:
    """The stages as a tree from the sources down, each under the stage it reads; a stage that
    reads several is shown whole under the first one reached, and named under the others.

    An edge is a line from a stage to a stage indented under it."""
    stages = pipeline.stages
    readers = {name: [s.name for s in stages.values() if name in s.inputs] for name in stages}
    lines: list[str] = []
    shown: set[str] = set()

    def visit(name: str, prefix: str, branch: str, rest: str) -> None:
        if name in shown:
            lines.append(f"{prefix}{branch}{name}  (shown above)")
            return
        shown.add(name)
        lines.append(f"{prefix}{branch}{describe(stages[name], columns.get(name))}")
        below = readers[name]
        for i, reader in enumerate(below):
            last = i == len(below) - 1
            visit(reader, prefix + rest, "`-- " if last else "|-- ", "    " if last else "|   ")

    for name, stage in stages.items():
        if not stage.inputs:
            visit(name, "", "", "")
    for name in stages:  # nothing should be left; a stage no source reaches is shown anyway
        if name not in shown:
            visit(name, "", "", "")
    return lines


def cmd_check(args: argparse.Namespace) -> int:
    pipeline, ledger = chosen(args)
    places = settings(args)
    found = validate(
        pipeline,
        quiet_session(args.spark),
        home=runtime_home(places.ledger),
        data=places.data,
    )
    if not found.ok:
        for problem in found.problems:
            print(f"epochgate: {problem}", file=sys.stderr)
        print(
            f"epochgate: {len(found.problems)} problem(s) in pipeline {pipeline.name!r}; "
            "nothing was run",
            file=sys.stderr,
        )
        return 1
    remember(ledger, pipeline)
    edges = sum(len(s.inputs) for s in pipeline.stages.values())
    print(f"pipeline {pipeline.name}: {len(pipeline.stages)} stages, {edges} edges")
    for line in tree(pipeline, found.columns):
        print(f"  {line}")
    print("ok: every rule holds, columns derived over empty inputs; nothing was run")
    return 0


def add_commands(commands: Commands) -> None:
    command(
        commands,
        "check",
        "validate a pipeline without running it and show its stages as a tree",
        handler=cmd_check,
        parents=[engine()],
        description=(
            "Check every rule of a pipeline's definition, derive each stage's columns over "
            "empty inputs (with Spark, running nothing), check the partial-state rules and the "
            "sink paths, and print the stages and edges as a tree with each stage's kind, key "
            "and delay. Exit 1 lists every problem found."
        ),
    )
