"""The ``epochgate`` command line."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from importlib.metadata import PackageNotFoundError, version

from pipelines import reports
from pipelines.settings import LEDGER_ENV, ledger_path
from progress import EpochgateError, Product, Time
from progress.ledger import Ledger


class UsageError(EpochgateError):
    """A command line that names something that does not exist."""


def _version() -> str:
    try:
        return version("epochgate")
    except PackageNotFoundError:  # running from a checkout that was not installed
        return "unknown"


Handler = Callable[[argparse.Namespace], int]


def parse_time(text: str) -> Time:
    """``7`` or ``7,2`` (epoch 7, round 2)."""
    try:
        parts = [int(p) for p in text.strip("() ").split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an epoch: {text!r}") from None
    if len(parts) == 1 and parts[0] >= 0:
        return parts[0]
    if len(parts) == 2 and min(parts) >= 0:
        return Product(parts[0], parts[1])
    raise argparse.ArgumentTypeError(f"not an epoch: {text!r}")


def open_ledger(args: argparse.Namespace) -> Ledger:
    path = ledger_path(args.ledger)
    if not path.exists():
        raise UsageError(
            f"no ledger at {path}; pass --ledger PATH or set {LEDGER_ENV} "
            "(a ledger is created when a pipeline is first registered)"
        )
    return Ledger(path, lock_timeout=args.lock_timeout)


def pick_pipelines(ledger: Ledger, name: str | None) -> list[str]:
    known = ledger.pipelines()
    if name is None:
        return known
    if name not in known:
        raise UsageError(
            f"pipeline {name!r} is not registered; registered: {', '.join(known) or '(none)'}"
        )
    return [name]


def cmd_status(args: argparse.Namespace) -> int:
    ledger = open_ledger(args)
    with ledger.session():
        statuses = [s for p in pick_pipelines(ledger, args.pipeline) for s in ledger.status(p)]
    if args.json:
        print(json.dumps(reports.status_json(statuses), indent=2))
    else:
        print(reports.status_table(statuses) or "no pipelines registered")
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    report = open_ledger(args).verify()
    print("\n".join(report.lines()))
    return 0 if report.ok else 1


def cmd_history(args: argparse.Namespace) -> int:
    ledger = open_ledger(args)
    with ledger.session():
        pipelines = pick_pipelines(ledger, args.pipeline)
        owners = [p for p in pipelines if args.stage in ledger.graph(p).nodes]
        if not owners:
            raise UsageError(f"no registered pipeline has a stage {args.stage!r}")
        if len(owners) > 1:
            raise UsageError(f"stage {args.stage!r} is in {', '.join(owners)}; pass --pipeline")
        history = ledger.history(owners[0], args.stage, args.epoch)
    print(reports.history_text(history))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="epochgate",
        description=(
            "Batch pipelines on Spark with exact logical time: every stage runs for an epoch "
            "once, and only when all of its input for that epoch is complete."
        ),
    )
    parser.add_argument("--version", action="version", version=f"epochgate {_version()}")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--ledger",
        metavar="PATH",
        help=f"ledger file (default: ${LEDGER_ENV} or .epochgate/ledger.duckdb)",
    )
    common.add_argument(
        "--lock-timeout",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="how long to wait for another process holding the ledger (default 60)",
    )
    common.add_argument("--pipeline", metavar="NAME", help="only this pipeline")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    status = commands.add_parser(
        "status", parents=[common], help="where every stage stands, and who holds waiting epochs"
    )
    status.add_argument("--json", action="store_true", help="print JSON instead of a table")
    status.set_defaults(handler=cmd_status)

    ledger = commands.add_parser("ledger", help="inspect the progress ledger")
    ledger_commands = ledger.add_subparsers(dest="ledger_command", metavar="COMMAND", required=True)
    verify = ledger_commands.add_parser(
        "verify", parents=[common], help="recompute counts from the log and compare"
    )
    verify.set_defaults(handler=cmd_verify)
    history = ledger_commands.add_parser(
        "history",
        parents=[common],
        help="batches, message attempts and runs of one stage and epoch",
    )
    history.add_argument("stage")
    history.add_argument("epoch", type=parse_time, help="an epoch, or EPOCH,ROUND")
    history.set_defaults(handler=cmd_history)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; errors epochgate raises on purpose print as one line, exit 1."""
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Handler | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 0
    try:
        return handler(args)
    except EpochgateError as err:
        print(f"epochgate: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
