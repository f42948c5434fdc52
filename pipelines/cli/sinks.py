"""The command that shows where each sink stands: ``sinks`` (its format, location, the epochs
it publishes, the last one, and its table's version); ``sinks --publish`` first publishes every
committed epoch a sink does not show."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict

from pipelines.cli.context import bound
from pipelines.cli.keyed import table
from pipelines.cli.options import JSON, Commands, command, engine


def cmd_sinks(args: argparse.Namespace) -> int:
    rt = bound(args)
    if args.publish:
        published = rt.publish_sinks(recheck=True)
        out = sys.stderr if args.json else sys.stdout  # --json: stdout is the states' lines
        for sink, epoch in published:
            print(f"published {sink} epoch {epoch}", file=out)
        if not published:
            print("every committed epoch is published", file=out)
    states = rt.sinks()
    if args.json:
        for state in states:
            print(json.dumps(asdict(state) | {"format": state.format.value}))
        return 0
    if not states:
        print("the pipeline has no sink")
        return 0
    header = ["sink", "format", "published", "last", "version", "location"]
    rows = [
        [
            s.sink,
            s.format.value,
            f"{s.published} of {s.committed}",
            "" if s.last_published is None else str(s.last_published),
            "" if s.version is None else str(s.version),
            s.location,
        ]
        for s in states
    ]
    print("\n".join(table(header, rows)))
    return 0


def add_commands(commands: Commands) -> None:
    sinks = command(
        commands,
        "sinks",
        "show each sink's format, location, last published epoch and table version",
        handler=cmd_sinks,
        parents=[engine()],
        description=(
            "Show, per sink, its format (parquet, delta or iceberg), where it publishes, how "
            "many of its committed epochs it shows, the last of them, and its table's version "
            "(a Delta or Iceberg sink's). Reads the ledger and the sinks; starts no Spark. "
            "run publishes what a killed run committed; --publish also puts back an epoch "
            "changed by hand (a link deleted, a table rolled back)."
        ),
    )
    JSON.add(sinks)
    sinks.add_argument(
        "--publish",
        action="store_true",
        help="first publish every committed epoch a sink does not show",
    )
