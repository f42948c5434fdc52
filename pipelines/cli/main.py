"""The ``epochgate`` command line."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from datetime import UTC, datetime
from functools import partial
from importlib.metadata import PackageNotFoundError, version

from pipelines.capture.follower import follow, settle_all
from pipelines.cli import reports
from pipelines.cli.capture import CaptureCommand, add_capture_commands
from pipelines.cli.keyed import KeyedCommand, add_keyed_commands, prepare
from pipelines.cli.references import choose, choose_names, examples_text
from pipelines.cli.replay import add_replay_commands
from pipelines.errors import BackfillIncompleteError, RunFailedError, StageFailedError, UsageError
from pipelines.examples.sizes import add_size_options
from pipelines.run.epochs import stage_epoch
from pipelines.run.inputs import source_worker
from pipelines.run.iteration import describe_round
from pipelines.run.runtime import Runtime
from pipelines.run.scheduling import close_epochs
from pipelines.settings import (
    DATA_ENV,
    DEMO_DATA_DIR,
    DEMO_DIR,
    HOME_ENV,
    LEDGER_ENV,
    Settings,
    absolute,
    state_dir,
)
from pipelines.spark.session import quiet_session
from pipelines.stages.pipeline import Pipeline
from progress import EpochgateError, InvalidTimeError, Time, timestamp
from progress.ledger import Ledger, Registration


def _version() -> str:
    try:
        return version("epochgate")
    except PackageNotFoundError:  # running from a checkout that was not installed
        return "unknown"


Handler = Callable[[argparse.Namespace], int]


def parse_time(text: str) -> Time:
    """``7`` or ``7,2`` (epoch 7, round 2), for argparse."""
    try:
        return timestamp.parse_time(text)
    except InvalidTimeError:
        raise argparse.ArgumentTypeError(f"not an epoch: {text!r}") from None


def settings(args: argparse.Namespace) -> Settings:
    """The places this command uses, resolved once (in ``main``)."""
    found: Settings = args.settings
    return found


def open_ledger(args: argparse.Namespace) -> Ledger:
    """The ledger of a command that only reads it: it must exist."""
    path = settings(args).ledger
    if not path.exists():
        raise UsageError(
            f"no ledger at {path}; pass --ledger PATH or set {LEDGER_ENV} "
            "(a ledger is created when a pipeline is first registered)"
        )
    return Ledger(path, lock_timeout=args.lock_timeout)


def registrations(ledger: Ledger) -> list[Registration]:
    """The ledger's registered pipelines; none, without creating it, when it does not exist."""
    return ledger.registrations() if ledger.path.exists() else []


def pick_pipelines(args: argparse.Namespace, ledger: Ledger) -> list[str]:
    """Every registered pipeline, or the one ``-p`` names."""
    return choose_names(registrations(ledger), args.pipeline, ledger.path)


def cmd_status(args: argparse.Namespace) -> int:
    ledger = open_ledger(args)
    with ledger.session():
        statuses = [s for p in pick_pipelines(args, ledger) for s in ledger.status(p)]
    if args.json:
        print(json.dumps(reports.status_json(statuses), indent=2))
    else:
        print(reports.status_table(statuses) or "no pipelines registered")
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    ledger = open_ledger(args)
    if args.pipeline is None:
        report = ledger.verify()
    else:
        (name,) = pick_pipelines(args, ledger)
        report = ledger.verify(name)
    print("\n".join(report.lines()))
    return 0 if report.ok else 1


def cmd_history(args: argparse.Namespace) -> int:
    ledger = open_ledger(args)
    with ledger.session():
        pipelines = pick_pipelines(args, ledger)
        owners = [p for p in pipelines if args.stage in ledger.graph(p).nodes]
        if not owners:
            raise UsageError(f"no registered pipeline has a stage {args.stage!r}")
        if len(owners) > 1:
            raise UsageError(f"stage {args.stage!r} is in {', '.join(owners)}; pass -p NAME")
        history = ledger.history(owners[0], args.stage, args.epoch)
    print(reports.history_text(history))
    return 0


def chosen(args: argparse.Namespace) -> tuple[Pipeline, Ledger]:
    """The pipeline ``-p`` means (the ledger's only one without it), and its ledger; nothing
    is registered yet."""
    ledger = Ledger(settings(args).ledger, lock_timeout=args.lock_timeout)
    follow(ledger)  # its commits (advance, close, clock) sync the pipeline's captures
    return choose(registrations(ledger), args.pipeline, ledger.path), ledger


def runtime(args: argparse.Namespace, pipeline: Pipeline, ledger: Ledger) -> Runtime:
    """``pipeline`` bound to the command's ledger and data (registering it); Spark starts only
    when something needs it."""
    return Runtime(
        pipeline,
        ledger,
        partial(quiet_session, args.spark),
        settings(args).data,
        on_round=lambda *progress: print(f"    {describe_round(*progress)}", flush=True),
    )


@contextmanager
def registering(ledger: Ledger, pipeline: Pipeline) -> Iterator[None]:
    """Where a command registers ``pipeline`` and acts: when registering changes anything, one
    ledger transaction holds both, so a command that fails leaves nothing registered."""
    needed = not pipeline.registered_in(ledger)
    with ledger.atomic() if needed else nullcontext():
        yield


def cmd_run(args: argparse.Namespace) -> int:
    pipeline, ledger = chosen(args)
    rt = runtime(args, pipeline, ledger)
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


def cmd_send(args: argparse.Namespace) -> int:
    pipeline, ledger = chosen(args)
    source_worker(pipeline, args.source, args.worker)
    # A pipeline registered as it is sends outside any transaction (with Spark, when the file
    # needs it, working while the ledger is free). The first send of a new or changed pipeline
    # registers it and sends in one transaction: a file refused registers nothing.
    with registering(ledger, pipeline):
        handle = runtime(args, pipeline, ledger).input(args.source, args.worker)
        epoch = handle.epoch
        result = handle.send(args.file)
    print(
        f"sent {args.file} to {args.source} worker {args.worker} at epoch {epoch} "
        f"(batch #{result.batch_id})"
    )
    return 0


def cmd_correct(args: argparse.Namespace) -> int:
    pipeline, ledger = chosen(args)
    source_worker(pipeline, args.source, args.worker)
    with registering(ledger, pipeline):  # a refused file registers nothing
        handle = runtime(args, pipeline, ledger).input(args.source, args.worker)
        result = handle.correct(args.epoch, args.file)
    print(
        f"corrected {args.source} worker {args.worker} at epoch {args.epoch} with {args.file} "
        f"(batch #{result.batch_id}); `epochgate run` re-runs what read the replaced data"
    )
    return 0


def cmd_advance(args: argparse.Namespace) -> int:
    pipeline, ledger = chosen(args)
    source_worker(pipeline, args.source, args.worker)
    with ledger.atomic():  # registered only if the advance commits
        pipeline.register(ledger)
        ledger.advance(pipeline.name, args.source, args.worker, args.epoch, seal=True)
        now = ledger.worker_time(pipeline.name, args.source, args.worker)
    print(f"{args.source} worker {args.worker} is at epoch {'closed' if now is None else now}")
    return 0


def cmd_close(args: argparse.Namespace) -> int:
    pipeline, ledger = chosen(args)
    source_worker(pipeline, args.source, args.worker)
    with ledger.atomic():  # registered only if the close commits
        pipeline.register(ledger)
        ledger.close(pipeline.name, args.source, args.worker)
    print(f"{args.source} worker {args.worker} is closed")
    return 0


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


def cmd_keyed(args: argparse.Namespace) -> int:
    """``lookup``, ``evict`` and ``state`` on the pipeline ``-p`` means: a command that fails
    before it reads (an unknown stage, a bad key) registers nothing."""
    pipeline, ledger = chosen(args)
    command: KeyedCommand = args.keyed
    with registering(ledger, pipeline):
        rt = runtime(args, pipeline, ledger)
        request = prepare(rt, args)
    return command(rt, request, args)


def cmd_capture(args: argparse.Namespace) -> int:
    """``capture start|stop|status|sync`` on the pipeline ``-p`` means."""
    pipeline, ledger = chosen(args)
    command: CaptureCommand = args.capture
    return command(runtime(args, pipeline, ledger), args)


def cmd_demo(args: argparse.Namespace) -> int:
    from pipelines.examples.demo import run_demo

    summary = run_demo(
        absolute(args.home) if args.home else state_dir() / DEMO_DIR,
        epochs=args.epochs,
        rows=args.rows,
        accounts=args.accounts,
        seed=args.seed,
        spark_master=args.spark,
    )
    return 0 if summary.verified else 1


def cmd_demo_data(args: argparse.Namespace) -> int:
    from pipelines.examples.bank_data import generate

    out = absolute(args.out) if args.out else state_dir() / DEMO_DATA_DIR
    data = generate(out, epochs=args.epochs, rows=args.rows, accounts=args.accounts, seed=args.seed)
    print(f"wrote {args.epochs} epochs under {data.root} (late file at epoch {data.late_epoch})")
    return 0


def cmd_spark(args: argparse.Namespace) -> int:
    from pipelines.spark import connect_server

    if args.spark_command == "start":
        connect_server.start(args.port, master=args.master, timeout=args.timeout)
    elif args.spark_command == "stop":
        connect_server.stop(args.port, timeout=args.timeout)
    else:
        for found in connect_server.statuses(args.port):
            print(found.describe())
    return 0


def _spark_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from pipelines.spark.connect_server import DEFAULT_MASTER, DEFAULT_PORT

    spark = commands.add_parser("spark", help="a local Spark Connect server (start, stop, status)")
    actions = spark.add_subparsers(dest="spark_command", metavar="COMMAND", required=True)
    port = argparse.ArgumentParser(add_help=False)
    port.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"port on 127.0.0.1 (default {DEFAULT_PORT})"
    )
    start = actions.add_parser(
        "start", parents=[port], help="start a server and print its sc:// URL"
    )
    start.add_argument(
        "--master", default=DEFAULT_MASTER, help=f"the server's master (default {DEFAULT_MASTER})"
    )
    start.add_argument(
        "--timeout", type=float, default=120.0, metavar="SECONDS", help="wait (default 120)"
    )
    stop = actions.add_parser("stop", parents=[port], help="stop the server by its pid")
    stop.add_argument(
        "--timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="wait after SIGTERM before SIGKILL (default 30)",
    )
    status = actions.add_parser("status", help="running or not, pid and URL")
    status.add_argument("--port", type=int, help="only this port (default: every known one)")
    for action in (start, stop, status):
        action.set_defaults(handler=cmd_spark)


def _engine_commands(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    engine: argparse.ArgumentParser,
) -> None:
    """The commands that drive a pipeline: run, backfill, send, correct, advance, close, clock."""
    run = commands.add_parser(
        "run", parents=[engine], help="run every ready (stage, epoch) until nothing is ready"
    )
    run.set_defaults(handler=cmd_run)
    backfill = commands.add_parser(
        "backfill",
        parents=[engine],
        help="recompute a stage over epochs with the current code; stale downstream re-runs",
    )
    backfill.add_argument("stage")
    backfill.add_argument("--from", dest="first", type=int, required=True, metavar="EPOCH")
    backfill.add_argument("--to", dest="last", type=int, required=True, metavar="EPOCH")
    backfill.set_defaults(handler=cmd_backfill)
    send = commands.add_parser(
        "send", parents=[engine], help="send a Parquet file to a source at its worker's epoch"
    )
    send.add_argument("source")
    send.add_argument("file")
    send.add_argument("--worker", type=int, default=0)
    send.set_defaults(handler=cmd_send)
    correct = commands.add_parser(
        "correct",
        parents=[engine],
        help="replace what a source worker sent at a past epoch with a file (a revision)",
    )
    correct.add_argument("source")
    correct.add_argument("epoch", type=int)
    correct.add_argument("file")
    correct.add_argument("--worker", type=int, default=0)
    correct.set_defaults(handler=cmd_correct)
    advance = commands.add_parser(
        "advance", parents=[engine], help="declare a source worker's epochs before EPOCH complete"
    )
    advance.add_argument("source")
    advance.add_argument("epoch", type=int)
    advance.add_argument("--worker", type=int, default=0)
    advance.set_defaults(handler=cmd_advance)
    close = commands.add_parser(
        "close", parents=[engine], help="nothing more will come from a source worker"
    )
    close.add_argument("source")
    close.add_argument("--worker", type=int, default=0)
    close.set_defaults(handler=cmd_close)
    clock = commands.add_parser(
        "clock",
        parents=[engine],
        help="close the epochs that time-based and marker-based sources have finished",
    )
    clock.add_argument("--now", metavar="TIME", help="ISO 8601 time with a zone (default: now)")
    clock.set_defaults(handler=cmd_clock)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="epochgate",
        description=(
            "Batch pipelines on Spark with exact logical time: every stage runs for an epoch "
            "once, and only when all of its input for that epoch is complete."
        ),
    )
    parser.add_argument("--version", action="version", version=f"epochgate {_version()}")
    connection = argparse.ArgumentParser(add_help=False)
    connection.add_argument(
        "--ledger",
        metavar="PATH",
        help=f"ledger file (default: ${LEDGER_ENV}, else ${HOME_ENV}/ledger.duckdb)",
    )
    connection.add_argument(
        "--lock-timeout",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="how long to wait for another process holding the ledger (default 60)",
    )
    reading = argparse.ArgumentParser(add_help=False, parents=[connection])
    reading.add_argument(
        "-p",
        "--pipeline",
        metavar="PIPELINE",
        help=(
            f"only this pipeline: a registered name, an example ({examples_text()}) or "
            "module:attribute (default: every registered one)"
        ),
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    status = commands.add_parser(
        "status", parents=[reading], help="where every stage stands, and who holds waiting epochs"
    )
    status.add_argument("--json", action="store_true", help="print JSON instead of a table")
    status.set_defaults(handler=cmd_status)

    ledger = commands.add_parser("ledger", help="inspect the progress ledger")
    ledger_commands = ledger.add_subparsers(dest="ledger_command", metavar="COMMAND", required=True)
    verify = ledger_commands.add_parser(
        "verify", parents=[reading], help="recompute counts from the log and compare"
    )
    verify.set_defaults(handler=cmd_verify)
    history = ledger_commands.add_parser(
        "history",
        parents=[reading],
        help="batches, message attempts and runs of one stage and epoch",
    )
    history.add_argument("stage")
    history.add_argument("epoch", type=parse_time, help="an epoch, or EPOCH,ROUND")
    history.set_defaults(handler=cmd_history)

    engine = argparse.ArgumentParser(add_help=False, parents=[connection])
    engine.add_argument(
        "--data",
        metavar="DIR",
        help=f"data directory (default: ${DATA_ENV}, else ${HOME_ENV}/data)",
    )
    engine.add_argument(
        "--spark",
        metavar="MASTER",
        help="local[N], a master URL or sc://host:port (default: $EPOCHGATE_SPARK or local[2])",
    )
    engine.add_argument(
        "-p",
        "--pipeline",
        metavar="PIPELINE",
        help=(
            f"a registered name, an example ({examples_text()}) or module:attribute "
            "(default: the ledger's only registered pipeline)"
        ),
    )

    _engine_commands(commands, engine)
    add_keyed_commands(commands, engine, cmd_keyed)
    add_replay_commands(commands, engine, lambda args: runtime(args, *chosen(args)))
    add_capture_commands(commands, engine, cmd_capture)

    demo = commands.add_parser("demo", help="run the bank example end to end and check it")
    add_size_options(demo)
    demo.add_argument(
        "--home",
        help=f"where the demo keeps its state (default ${HOME_ENV}/{DEMO_DIR}; replaced)",
    )
    demo.add_argument("--spark", metavar="MASTER", help="Spark master (default local[2])")
    demo.set_defaults(handler=cmd_demo)
    demo_data = commands.add_parser("demo-data", help="write seeded bank inputs")
    add_size_options(demo_data)
    demo_data.add_argument("--out", help=f"output directory (default ${HOME_ENV}/{DEMO_DATA_DIR})")
    demo_data.set_defaults(handler=cmd_demo_data)
    _spark_commands(commands)
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
