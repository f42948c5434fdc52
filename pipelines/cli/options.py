"""The command line's options and argument types, each declared once and shared by every command.

A command takes its options from a parent below (``reading``, ``engine``) or adds a single
``Option`` itself; either way the flag, its type and its help are the ones declared here.
``command`` adds a command whose ``--help`` starts by saying what it does.

    >>> non_negative("7"), seconds("0.5"), parse_time("7,2")
    (7, 0.5, Product(outer=7, inner=2))
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from pipelines.cli.references import examples_text
from pipelines.settings import DATA_ENV, HOME_ENV, LEDGER_ENV
from progress import InvalidTimeError, Time, timestamp

Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
"""Where a command group adds its commands."""

Handler = Callable[[argparse.Namespace], int]
"""What every command is run by: its parsed arguments in, its exit status out."""


# -- argument types -------------------------------------------------------------------------


def non_negative(text: str) -> int:
    """An epoch: an int >= 0."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"not an epoch: {text!r}")
    return value


def parse_time(text: str) -> Time:
    """``7`` or ``7,2`` (epoch 7, round 2)."""
    try:
        return timestamp.parse_time(text)
    except InvalidTimeError:
        raise argparse.ArgumentTypeError(f"not an epoch: {text!r}") from None


def seconds(text: str) -> float:
    """A number of seconds >= 0."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}")
    return value


# -- options ----------------------------------------------------------------------------------

DECLARED = object()
"""``Option.add``'s default when the command keeps the declared one."""


@dataclass(frozen=True)
class Option:
    """One option: its flags and ``add_argument`` settings. A command may give it another
    default (and say so in ``default_text``), never another flag, type or meaning."""

    flags: tuple[str, ...]
    help: str
    settings: dict[str, Any] = field(default_factory=dict)
    default_text: str | None = None
    """How the help ends: ``(default: ...)``; None when the option has no default to tell."""

    def add(
        self,
        parser: argparse.ArgumentParser,
        *,
        default: object = DECLARED,
        default_text: str | None = None,
    ) -> None:
        """Add it to ``parser``; ``default`` and ``default_text`` replace the declared ones."""
        settings = dict(self.settings)
        if default is not DECLARED:
            settings["default"] = default
        told = default_text or self.default_text
        text = f"{self.help} (default: {told})" if told else self.help
        parser.add_argument(*self.flags, help=text, **settings)


PIPELINE = Option(
    ("-p", "--pipeline"),
    f"the pipeline: a registered name, an example ({examples_text()}) or module:attribute, "
    "imported with the working directory on the path and recorded in the ledger",
    {"metavar": "PIPELINE"},
)
LEDGER = Option(
    ("--ledger",),
    "the ledger file",
    {"metavar": "PATH"},
    f"${LEDGER_ENV}, else ${HOME_ENV}/ledger.duckdb",
)
LOCK_TIMEOUT = Option(
    ("--lock-timeout",),
    "how long to wait for another process holding the ledger",
    {"type": seconds, "default": 60.0, "metavar": "SECONDS"},
    "60",
)
DATA = Option(
    ("--data",),
    "the data directory",
    {"metavar": "DIR"},
    f"${DATA_ENV}, else ${HOME_ENV}/data",
)
SPARK = Option(
    ("--spark",),
    "the Spark engine: local[N], a master URL, sc://host:port, sail or sail-local-cluster",
    {"metavar": "MASTER"},
    "$EPOCHGATE_SPARK, else local[2]",
)
WORKER = Option(
    ("--worker",),
    "the source's input worker",
    {"type": int, "default": 0, "metavar": "W"},
    "0",
)
JSON = Option(("--json",), "print JSON instead of text", {"action": "store_true"})
WAIT = Option(
    ("--wait",),
    "wait this long for another process to finish the epoch asked for",
    {"type": seconds, "metavar": "SECONDS"},
)
SOURCE = Option(("source",), "a source of the pipeline")
STAGE = Option(("stage",), "a stage of the pipeline")
FILE = Option(("file",), "a Parquet file with the source's columns")


def _parent(*options: Option, pipeline_default: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(add_help=False)
    for option in options:
        if option is PIPELINE:
            option.add(parser, default_text=pipeline_default)
        else:
            option.add(parser)
    return parser


def reading() -> argparse.ArgumentParser:
    """The options of a command that only reads the ledger: ``-p`` narrows it to one pipeline."""
    return _parent(LEDGER, LOCK_TIMEOUT, PIPELINE, pipeline_default="every registered one")


def engine() -> argparse.ArgumentParser:
    """The options of a command that drives one pipeline (and may start Spark)."""
    return _parent(
        LEDGER,
        LOCK_TIMEOUT,
        DATA,
        SPARK,
        PIPELINE,
        pipeline_default="the ledger's only registered pipeline",
    )


def command(
    commands: Commands,
    name: str,
    help: str,
    *,
    handler: Handler | None = None,
    parents: Sequence[argparse.ArgumentParser] = (),
    description: str | None = None,
) -> argparse.ArgumentParser:
    """Add command ``name``: ``help`` is its line in its group's list and, unless a longer
    ``description`` is given, the first line of its own ``--help``."""
    parser = commands.add_parser(
        name,
        parents=list(parents),
        help=help,
        description=description or help[0].upper() + help[1:] + ".",
    )
    if handler is not None:
        parser.set_defaults(handler=handler)
    return parser


def group(parser: argparse.ArgumentParser, name: str) -> Commands:
    """The commands under a command (``ledger verify``): one of them is required."""
    return parser.add_subparsers(dest=f"{name}_command", metavar="COMMAND", required=True)
