"""The ``epochgate`` command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from importlib.metadata import PackageNotFoundError, version

from progress import EpochgateError


def _version() -> str:
    try:
        return version("epochgate")
    except PackageNotFoundError:  # running from a checkout that was not installed
        return "unknown"


Handler = Callable[[argparse.Namespace], int]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="epochgate",
        description=(
            "Batch pipelines on Spark with exact logical time: every stage runs for an epoch "
            "once, and only when all of its input for that epoch is complete."
        ),
    )
    parser.add_argument("--version", action="version", version=f"epochgate {_version()}")
    parser.add_subparsers(dest="command", metavar="COMMAND")
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
