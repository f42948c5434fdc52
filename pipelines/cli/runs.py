"""The commands that run stages: ``run``, ``backfill``, and ``clock`` (which closes epochs by
time and by done-markers)."""

from __future__ import annotations

import argparse
import sys
import time
from datetime import UTC, datetime

from pipelines.cli.context import chosen, registrations, runtime
from pipelines.cli.options import STAGE, Commands, command, engine
from pipelines.errors import BackfillIncompleteError, RunFailedError, StageFailedError, UsageError
from pipelines.run.epoch_runs import run_epoch
from pipelines.run.epochs import stage_epoch
from pipelines.run.runtime import Runtime
from pipelines.run.scheduling import close_epochs
from progress import Time


def cmd_run(args: argparse.Namespace) -> int:
    if args.stages and args.epoch is None:
        raise UsageError("--stage needs --epoch: a whole run runs every ready stage")
    pipeline, ledger = chosen(args)
    rt = runtime(args, pipeline, ledger)
    if args.epoch is not None:
        return _run_epoch(rt, args.epoch, args.stages or None)
    started = time.perf_counter()
    failures: tuple[StageFailedError, ...] = ()
    try:
        results = rt.run(lambda r: print(f"  {rt.pipeline.name}.{r.describe()}", flush=True))
    except RunFailedError as err:
        results, failures = list(err.results), err.failures
    print(f"{len(results)} stage run(s) in {time.perf_counter() - started:.1f}s")
    waiting = [f"{s} epoch {t}" for s, t in rt.pending()]
    if waiting:
        print(
            f"waiting: {', '.join(waiting[:8])}{' ...' if len(waiting) > 8 else ''} "
            "(epochgate status says who holds them)"
        )
    for failure in failures:
        print(f"epochgate: {failure}", file=sys.stderr)
    return 1 if failures else 0


def _run_epoch(rt: Runtime, epoch: int, stages: list[str] | None) -> int:
    """``run --epoch``: that epoch's stages, upstream first (``pipelines.run.epoch_runs``)."""
    started = time.perf_counter()
    try:
        done = run_epoch(
            rt, epoch, stages, lambda r: print(f"  {rt.pipeline.name}.{r.describe()}", flush=True)
        )
    except StageFailedError as err:
        print(f"epochgate: {err}", file=sys.stderr)
        return 1
    seconds = time.perf_counter() - started
    print(f"{len(done.results)} stage run(s) at epoch {epoch} in {seconds:.1f}s")
    for stage, holds in done.waiting.items():
        print(f"waiting: {stage} epoch {epoch}: {'; '.join(holds)}")
    return 0


def cmd_backfill(args: argparse.Namespace) -> int:
    for end in (args.first, args.last):  # before a range of them is made
        stage_epoch(args.stage, end)
    if args.last < args.first:
        raise UsageError(f"--to {args.last} is before --from {args.first}")
    pipeline, ledger = chosen(args)
    if pipeline.name not in [r.pipeline for r in registrations(ledger)]:
        raise UsageError(
            f"pipeline {pipeline.name!r} is not registered in {ledger.path}: nothing was sent "
            "to it, so nothing can be backfilled"
        )
    pipeline.stage(args.stage)  # an unknown stage fails before anything is registered
    rt = runtime(args, pipeline, ledger)
    started = time.perf_counter()
    epochs = list(range(args.first, args.last + 1))
    left: dict[Time, tuple[str, ...]] = {}
    try:
        results = rt.backfill(
            args.stage, epochs, lambda r: print(f"  {rt.pipeline.name}.{r.describe()}", flush=True)
        )
    except BackfillIncompleteError as err:
        results, left = list(err.results), err.left
    print(
        f"backfilled {args.stage} epochs {args.first}-{args.last}: {len(results)} stage run(s) "
        f"in {time.perf_counter() - started:.1f}s"
    )
    for epoch, holds in left.items():
        why = "; ".join(holds) or "its input is not complete"
        print(f"epochgate: {args.stage} epoch {epoch} was not run: {why}", file=sys.stderr)
    return 1 if left else 0


def cmd_clock(args: argparse.Namespace) -> int:
    now = datetime.now(UTC)
    if args.now:
        try:
            now = datetime.fromisoformat(args.now)
        except ValueError as err:
            raise UsageError(f"--now {args.now!r} is not an ISO 8601 time: {err}") from err
        if now.tzinfo is None:
            raise UsageError(f"--now {args.now!r} has no time zone (e.g. 2026-11-21T10:00Z)")
    pipeline, ledger = chosen(args)
    with ledger.atomic():  # registered only if the tick commits
        tick = close_epochs(ledger, pipeline, now)
    for line in tick.lines():
        print(line)
    if not tick.waiting and not tick.closed:
        print(f"{pipeline.name}: every source is closed by its workers (advance/close)")
    return 0


def add_commands(commands: Commands) -> None:
    run = command(
        commands,
        "run",
        "run every ready (stage, epoch) until nothing is ready, or one epoch's stages",
        handler=cmd_run,
        parents=[engine()],
    )
    run.add_argument(
        "--epoch",
        type=int,
        metavar="EPOCH",
        help="run only this epoch's stages, upstream first, each once when its input is complete",
    )
    run.add_argument(
        "--stage",
        dest="stages",
        action="append",
        metavar="STAGE",
        help="with --epoch: only this stage (repeat for more)",
    )
    backfill = command(
        commands,
        "backfill",
        "recompute a stage over epochs with the current code; stale downstream re-runs",
        handler=cmd_backfill,
        parents=[engine()],
    )
    STAGE.add(backfill)
    backfill.add_argument("--from", dest="first", type=int, required=True, metavar="EPOCH")
    backfill.add_argument("--to", dest="last", type=int, required=True, metavar="EPOCH")
    clock = command(
        commands,
        "clock",
        "close the epochs that time-based and marker-based sources have finished",
        handler=cmd_clock,
        parents=[engine()],
    )
    clock.add_argument("--now", metavar="TIME", help="ISO 8601 time with a zone (default: now)")
