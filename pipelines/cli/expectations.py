"""The command that shows what a pipeline's expectations found: ``checks``, one line per
recorded result (a stage's run or a source's send), oldest first."""

from __future__ import annotations

import argparse
import json

from pipelines.cli.context import bound
from pipelines.cli.keyed import table
from pipelines.cli.options import JSON, Commands, command, engine, non_negative
from progress.timestamp import time_to_data


def cmd_checks(args: argparse.Namespace) -> int:
    rt = bound(args)
    results = rt.expectations(args.stage, args.epoch)
    if args.json:
        for r in results:
            record = {
                "stage": r.stage,
                "epoch": time_to_data(r.epoch),
                "attempt": r.attempt,
                "expectation": r.expectation,
                "rows_checked": r.rows_checked,
                "rows_failing": r.rows_failing,
                "action": r.action.value,
                "committed": r.committed,
                "recorded_at": r.recorded_at.isoformat(),
            }
            print(json.dumps(record))
        return 0
    if not results:
        print("no expectation results recorded" + (f" for {args.stage}" if args.stage else ""))
        return 0
    header = ["stage", "epoch", "expectation", "action", "checked", "failing", "outcome"]
    rows = [
        [
            r.stage,
            str(r.epoch),
            r.expectation,
            r.action.value,
            f"{r.rows_checked:,}",
            f"{r.rows_failing:,}",
            "passed" if r.passed else ("committed" if r.committed else "run stopped"),
        ]
        for r in results
    ]
    for line in table(header, rows):
        print(line)
    return 0


def add_commands(commands: Commands) -> None:
    checks = command(
        commands,
        "checks",
        "show what the pipeline's expectations found, per stage and epoch",
        handler=cmd_checks,
        parents=[engine()],
        description=(
            "Show every recorded expectation result, oldest first: the rows each checked and "
            "those failing it, its action (warn, drop, fail), and whether the run was committed "
            "or a fail expectation stopped it."
        ),
    )
    checks.add_argument("stage", nargs="?", help="only this stage (default: every stage)")
    checks.add_argument("--epoch", type=non_negative, metavar="E", help="only this epoch")
    JSON.add(checks)
