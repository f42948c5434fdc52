"""The command that shows how far behind each stage is: ``lag`` (and, with ``--sources``, how
late each input worker releases its epochs)."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from datetime import datetime

from pipelines.cli.context import bound
from pipelines.cli.keyed import table
from pipelines.cli.options import JSON, Commands, command, engine, non_negative


def _seconds(value: float | None) -> str:
    return "" if value is None else f"{value:.1f}s"


def cmd_lag(args: argparse.Namespace) -> int:
    rt = bound(args)
    if args.sources:
        sources = [name for name, s in rt.pipeline.stages.items() if s.is_source and s.workers]
        found = [w for source in sources for w in rt.lateness(source, last=args.last)]
        if args.json:
            for w in found:
                print(json.dumps(asdict(w)))
            return 0
        if not found:
            print("no epoch has been released by every worker of a source yet")
        for w in found:
            print(w.describe())
        return 0
    lags = rt.lag()
    if args.json:
        for lag in lags:
            record = asdict(lag) | {
                "input_complete_at": _iso(lag.input_complete_at),
                "final_at": _iso(lag.final_at),
            }
            print(json.dumps(record))
        return 0
    header = ["stage", "final", "latency", "open", "open for", "held by"]
    rows = [
        [
            lag.stage,
            "" if lag.latest_final is None else str(lag.latest_final),
            _seconds(lag.latency_seconds),
            "" if lag.oldest_open is None else str(lag.oldest_open),
            _seconds(lag.open_seconds),
            "; ".join(lag.blockers),
        ]
        for lag in lags
    ]
    for line in table(header, rows):
        print(line)
    return 0


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def add_commands(commands: Commands) -> None:
    lag = command(
        commands,
        "lag",
        "show how far behind each stage is, or how late each input worker is",
        handler=cmd_lag,
        parents=[engine()],
        description=(
            "Show, per stage, its latest final epoch and the seconds from its input's "
            "completion to its output's finality, and its oldest epoch that is not final: "
            "how long ago its first message arrived and what holds it. With --sources, how "
            "long after the first worker of its source each worker released its epochs."
        ),
    )
    lag.add_argument(
        "--sources", action="store_true", help="how late each input worker is, instead"
    )
    lag.add_argument(
        "--last",
        type=non_negative,
        default=20,
        metavar="N",
        help="with --sources: over the last N epochs (default: 20)",
    )
    JSON.add(lag)
