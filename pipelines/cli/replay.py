"""The command line's ``replay``: feed a pipeline's replayed sources and run what is ready.

``epochgate replay -p PIPELINE`` feeds the events its captures hold now and runs every ready
``(stage, epoch)`` (as ``epochgate run`` does). With ``--follow`` it goes on, every ``--poll``
seconds, tailing captures still being written, until interrupted or until every replayed
stream is done and nothing is left to run. With ``--diff --captured-outputs DIR...`` it then
compares, per stage and epoch, the committed outputs with captured ones
(``pipelines.capture.diff``), prints the differences and exits 1 when there is any.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING

from pipelines.capture.diff import diff_outputs, diff_table
from pipelines.cli.context import bound
from pipelines.cli.options import Commands, command, engine, seconds
from pipelines.errors import RunFailedError

if TYPE_CHECKING:
    from pipelines.run.runtime import Runtime


def add_commands(commands: Commands) -> None:
    replay = command(
        commands,
        "replay",
        "feed a pipeline's replayed sources from their captures and run what is ready",
        handler=cmd_replay,
        parents=[engine()],
    )
    replay.add_argument(
        "--follow",
        action="store_true",
        help="keep feeding and running as the captures grow, until interrupted or until every "
        "replayed stream is done and nothing is left to run",
    )
    replay.add_argument(
        "--poll",
        type=seconds,
        default=1.0,
        metavar="SECONDS",
        help="with --follow, seconds between two looks at the captures (default 1)",
    )
    replay.add_argument(
        "--diff",
        action="store_true",
        help="then compare each captured output's stage, epoch by epoch, with the pipeline's "
        "committed output; exit 1 on any difference",
    )
    replay.add_argument(
        "--captured-outputs",
        nargs="+",
        default=[],
        metavar="DIR",
        help="with --diff, captures of the stages' outputs (each header names its stage)",
    )


def cmd_replay(args: argparse.Namespace) -> int:
    if args.diff and not args.captured_outputs:
        print("epochgate: --diff needs --captured-outputs DIR...", file=sys.stderr)
        return 2
    rt = bound(args)
    if not rt.replayed:
        print(f"epochgate: pipeline {rt.pipeline.name} has no replayed source", file=sys.stderr)
        return 1
    while True:
        try:
            failed = step(rt)
        except KeyboardInterrupt:
            print("stopped", flush=True)
            return 0
        if failed or not args.follow or finished(rt):
            break
        try:
            time.sleep(args.poll)
        except KeyboardInterrupt:
            print("stopped", flush=True)
            return 0
    if failed:
        return 1
    if args.diff:
        differences = diff_outputs(rt, args.captured_outputs)
        print(diff_table(differences))
        return 1 if any(d.differs for d in differences) else 0
    return 0


def step(rt: Runtime) -> bool:
    """Feed what the captures hold now, then run what is ready (without feeding again: what
    arrives meanwhile is fed, and counted, by the next step); True when a run failed."""
    fed = rt.replay()
    started = time.perf_counter()
    try:
        results = rt.run(
            lambda r: print(f"  {rt.pipeline.name}.{r.describe()}", flush=True), replay=False
        )
    except RunFailedError as err:
        for failure in err.failures:
            print(f"epochgate: {failure}", file=sys.stderr)
        return True
    if fed or results:
        print(
            f"fed {fed} event(s); {len(results)} stage run(s) in "
            f"{time.perf_counter() - started:.1f}s",
            flush=True,
        )
    return False


def finished(rt: Runtime) -> bool:
    """Whether every replayed stream is done and nothing is left to run."""
    p = rt.pipeline.name
    for stage in rt.pipeline.replayed_sources():
        for worker in range(stage.workers):
            if rt.ledger.worker_time(p, stage.name, worker) is not None:
                return False
    return not rt.ready() and not rt.stale()
