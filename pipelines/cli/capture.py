"""The command line's captures: ``epochgate capture start|stop|status|sync``."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pipelines.capture.sync import CaptureStatus
from pipelines.stages.arguments import non_negative

if TYPE_CHECKING:
    from pipelines.run.runtime import Runtime

CaptureCommand = Callable[["Runtime", argparse.Namespace], int]


def describe(found: CaptureStatus) -> str:
    """One line per capture: what it records, where, how far, and whether it is behind."""
    what = found.stage + (f" worker {found.worker}" if found.worker is not None else "")
    if found.error is not None:
        return f"{what} -> {found.directory}: cannot read its log: {found.error}"
    if found.done:
        released = "every epoch released"
    elif found.released is None:
        released = "no epoch released yet"
    else:
        released = f"released through epoch {found.released}"
    state = "stopped" if found.stopped else f"{found.behind} event(s) behind"
    return (
        f"{what} -> {found.directory}: {found.events} events, {released}, {found.rows} rows, "
        f"{found.bytes} bytes, {state}"
    )


def status_table(found: Sequence[CaptureStatus]) -> str:
    return "\n".join(describe(c) for c in found)


def cmd_start(rt: Runtime, args: argparse.Namespace) -> int:
    found = rt.capture(args.stage, args.into, from_epoch=args.from_epoch, worker=args.worker)
    print(f"capturing {describe(found)}")
    return 0


def cmd_stop(rt: Runtime, args: argparse.Namespace) -> int:
    rt.pipeline.stage(args.stage)
    found = rt.stop_capture(args.into)
    print(f"stopped {describe(found)}")
    return 0


def cmd_status(rt: Runtime, args: argparse.Namespace) -> int:
    into = None if args.into is None else str(Path(args.into).resolve())
    found = [
        c
        for c in rt.captures()
        if (args.stage is None or c.stage == args.stage) and (into is None or c.directory == into)
    ]
    if args.json:
        print(json.dumps([c.as_json() for c in found], indent=2))
    else:
        print(status_table(found) or f"pipeline {rt.pipeline.name} has no capture")
    return 0


def cmd_sync(rt: Runtime, args: argparse.Namespace) -> int:
    print(f"{rt.sync_captures()} event(s) appended")
    return 0


def add_capture_commands(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    engine: argparse.ArgumentParser,
    handler: Callable[[argparse.Namespace], int],
) -> None:
    """``capture start|stop|status|sync``; ``handler`` binds the pipeline and calls the
    command's ``capture`` function with its runtime."""
    parser = commands.add_parser(
        "capture", help="record a stage's output stream (data and progress) into a directory"
    )
    actions = parser.add_subparsers(dest="capture_command", metavar="COMMAND", required=True)
    start = actions.add_parser(
        "start",
        parents=[engine],
        help="start recording a stage's stream into a new directory",
        description=(
            "Record STAGE's output stream into DIR: every commit that changes it appends its "
            "messages and progress, until `capture stop`."
        ),
    )
    start.add_argument("stage")
    start.add_argument("--into", required=True, metavar="DIR", help="a directory with no capture")
    start.add_argument(
        "--from-epoch",
        type=non_negative,
        metavar="E",
        help="record the committed history from this epoch first (default: from the stream's "
        "frontier, with what is already committed at open epochs)",
    )
    start.add_argument(
        "--worker", type=int, metavar="W", help="only this input worker of a source stage"
    )
    start.set_defaults(handler=handler, capture=cmd_start)
    stop = actions.add_parser(
        "stop", parents=[engine], help="bring a capture up to date one last time and stop it"
    )
    stop.add_argument("stage")
    stop.add_argument("--into", required=True, metavar="DIR")
    stop.set_defaults(handler=handler, capture=cmd_stop)
    status = actions.add_parser(
        "status",
        parents=[engine],
        help="every capture (or a stage's): events, last epoch released, rows, bytes, behind",
    )
    status.add_argument("stage", nargs="?")
    status.add_argument("--into", metavar="DIR", help="only the capture in this directory")
    status.add_argument("--json", action="store_true", help="print JSON instead of lines")
    status.set_defaults(handler=handler, capture=cmd_status)
    sync = actions.add_parser(
        "sync",
        parents=[engine],
        help="bring every capture up to the ledger now (after a crash left one behind)",
    )
    sync.set_defaults(handler=handler, capture=cmd_sync)
