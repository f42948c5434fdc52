"""The commands that read the ledger: ``status``, ``ledger verify`` and ``ledger history``."""

from __future__ import annotations

import argparse
import json

from pipelines.cli import reports
from pipelines.cli.context import open_ledger, pick_pipelines
from pipelines.cli.options import JSON, STAGE, Commands, command, group, parse_time, reading
from pipelines.errors import UsageError


def cmd_status(args: argparse.Namespace) -> int:
    ledger = open_ledger(args)
    with ledger.session():
        statuses = [s for p in pick_pipelines(args, ledger) for s in ledger.status(p)]
    if args.json:
        print(json.dumps(reports.status_json(statuses), indent=2))
    else:
        print(reports.status_table(statuses) or "no pipelines registered")
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    ledger = open_ledger(args)
    if args.pipeline is None:
        report = ledger.verify()
    else:
        (name,) = pick_pipelines(args, ledger)
        report = ledger.verify(name)
    print("\n".join(report.lines()))
    return 0 if report.ok else 1


def cmd_history(args: argparse.Namespace) -> int:
    ledger = open_ledger(args)
    with ledger.session():
        pipelines = pick_pipelines(args, ledger)
        owners = [p for p in pipelines if args.stage in ledger.graph(p).nodes]
        if not owners:
            raise UsageError(f"no registered pipeline has a stage {args.stage!r}")
        if len(owners) > 1:
            raise UsageError(f"stage {args.stage!r} is in {', '.join(owners)}; pass -p NAME")
        history = ledger.history(owners[0], args.stage, args.epoch)
    print(reports.history_text(history))
    return 0


def add_commands(commands: Commands) -> None:
    status = command(
        commands,
        "status",
        "where every stage stands, and who holds waiting epochs",
        handler=cmd_status,
        parents=[reading()],
    )
    JSON.add(status)
    inspect = command(commands, "ledger", "inspect the progress ledger (verify, history)")
    actions = group(inspect, "ledger")
    command(
        actions,
        "verify",
        "recompute counts from the log and compare them with the ledger's",
        handler=cmd_verify,
        parents=[reading()],
    )
    history = command(
        actions,
        "history",
        "batches, message attempts and runs of one stage and epoch",
        handler=cmd_history,
        parents=[reading()],
    )
    STAGE.add(history)
    history.add_argument("epoch", type=parse_time, help="an epoch, or EPOCH,ROUND")
