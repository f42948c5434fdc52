"""The command line's captures: ``epochgate capture start|stop|status|sync``."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

from pipelines.capture.sync import CaptureStatus
from pipelines.cli.context import bound
from pipelines.cli.options import (
    JSON,
    STAGE,
    WORKER,
    Commands,
    command,
    engine,
    group,
    non_negative,
)


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


def cmd_start(args: argparse.Namespace) -> int:
    rt = bound(args)
    found = rt.capture(args.stage, args.into, from_epoch=args.from_epoch, worker=args.worker)
    print(f"capturing {describe(found)}")
    return 0


def cmd_stop(args: argparse.Namespace) -> int:
    rt = bound(args)
    rt.pipeline.stage(args.stage)
    found = rt.stop_capture(args.into)
    print(f"stopped {describe(found)}")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    rt = bound(args)
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


def cmd_sync(args: argparse.Namespace) -> int:
    rt = bound(args)
    print(f"{rt.sync_captures()} event(s) appended")
    return 0


def add_commands(commands: Commands) -> None:
    parser = command(
        commands,
        "capture",
        "record a stage's output stream (data and progress) into a directory "
        "(start, stop, status, sync)",
    )
    actions = group(parser, "capture")
    start = command(
        actions,
        "start",
        "start recording a stage's stream into a new directory",
        handler=cmd_start,
        parents=[engine()],
        description=(
            "Record STAGE's output stream into DIR: every commit that changes it appends its "
            "messages and progress, until `capture stop`."
        ),
    )
    STAGE.add(start)
    start.add_argument("--into", required=True, metavar="DIR", help="a directory with no capture")
    start.add_argument(
        "--from-epoch",
        type=non_negative,
        metavar="E",
        help="record the committed history from this epoch first (default: from the stream's "
        "frontier, with what is already committed at open epochs)",
    )
    WORKER.add(start, default=None, default_text="every worker of a source stage")
    stop = command(
        actions,
        "stop",
        "bring a capture up to date one last time and stop it",
        handler=cmd_stop,
        parents=[engine()],
    )
    STAGE.add(stop)
    stop.add_argument("--into", required=True, metavar="DIR")
    status = command(
        actions,
        "status",
        "every capture (or a stage's): events, last epoch released, rows, bytes, behind",
        handler=cmd_status,
        parents=[engine()],
    )
    status.add_argument("stage", nargs="?", help="only this stage's captures")
    status.add_argument("--into", metavar="DIR", help="only the capture in this directory")
    JSON.add(status)
    command(
        actions,
        "sync",
        "bring every capture up to the ledger now (after a crash left one behind)",
        handler=cmd_sync,
        parents=[engine()],
    )
