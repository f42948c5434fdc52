"""The ``epochgate`` command line: its parser, made of every command group's commands, and
``main``, which runs the command a command line names."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from pipelines.capture.follower import settle_all
from pipelines.cli import (
    capture,
    check,
    demo,
    expectations,
    init,
    inputs,
    keyed,
    lag,
    ledger,
    outputs,
    replay,
    runs,
    sail,
    sinks,
    spark,
)
from pipelines.cli.init import epochgate_version
from pipelines.cli.options import Handler
from pipelines.settings import Settings
from progress import EpochgateError

GROUPS = (
    init,
    check,
    inputs,
    runs,
    outputs,
    sinks,
    expectations,
    lag,
    ledger,
    keyed,
    capture,
    replay,
    demo,
    spark,
    sail,
)
"""The command groups, in the order ``epochgate --help`` lists their commands."""


def build_parser() -> argparse.ArgumentParser:
    """The parser of every command; each command's ``handler`` is what runs it."""
    parser = argparse.ArgumentParser(
        prog="epochgate",
        description=(
            "Batch pipelines on Spark with exact logical time: every stage runs for an epoch "
            "once, and only when all of its input for that epoch is complete."
        ),
        epilog="`epochgate COMMAND --help` says what a command does and takes.",
    )
    parser.add_argument("--version", action="version", version=f"epochgate {epochgate_version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for commands_of in GROUPS:
        commands_of.add_commands(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; errors epochgate raises on purpose print as one line, exit 1."""
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Handler | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 0
    # Every path the command uses, absolute, from its flags, the environment and defaults.
    args.settings = Settings.resolve(getattr(args, "ledger", None), getattr(args, "data", None))
    try:
        return handler(args)
    except EpochgateError as err:
        print(f"epochgate: {err}", file=sys.stderr)
        return 1
    finally:
        settle_all()  # the captures a command's commits changed, before it exits


if __name__ == "__main__":
    sys.exit(main())
