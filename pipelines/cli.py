"""The ``epochgate`` command line."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from pipelines import reports
from pipelines.dataflow import Pipeline
from pipelines.examples import registry
from pipelines.examples.sizes import add_size_options
from pipelines.iteration import describe_round
from pipelines.runtime import Runtime
from pipelines.scheduling import close_epochs
from pipelines.settings import LEDGER_ENV, data_path, ledger_path
from progress import EpochgateError, InvalidTimeError, Time, timestamp
from progress.ledger import Ledger


class UsageError(EpochgateError):
    """A command line that names something that does not exist."""


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


def open_ledger(args: argparse.Namespace) -> Ledger:
    path = ledger_path(args.ledger)
    if not path.exists():
        raise UsageError(
            f"no ledger at {path}; pass --ledger PATH or set {LEDGER_ENV} "
            "(a ledger is created when a pipeline is first registered)"
        )
    return Ledger(path, lock_timeout=args.lock_timeout)


def pick_pipelines(ledger: Ledger, name: str | None) -> list[str]:
    known = ledger.pipelines()
    if name is None:
        return known
    if name not in known:
        raise UsageError(
            f"pipeline {name!r} is not registered; registered: {', '.join(known) or '(none)'}"
        )
    return [name]


def cmd_status(args: argparse.Namespace) -> int:
    ledger = open_ledger(args)
    with ledger.session():
        statuses = [s for p in pick_pipelines(ledger, args.pipeline) for s in ledger.status(p)]
    if args.json:
        print(json.dumps(reports.status_json(statuses), indent=2))
    else:
        print(reports.status_table(statuses) or "no pipelines registered")
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    report = open_ledger(args).verify()
    print("\n".join(report.lines()))
    return 0 if report.ok else 1


def cmd_history(args: argparse.Namespace) -> int:
    ledger = open_ledger(args)
    with ledger.session():
        pipelines = pick_pipelines(ledger, args.pipeline)
        owners = [p for p in pipelines if args.stage in ledger.graph(p).nodes]
        if not owners:
            raise UsageError(f"no registered pipeline has a stage {args.stage!r}")
        if len(owners) > 1:
            raise UsageError(f"stage {args.stage!r} is in {', '.join(owners)}; pass --pipeline")
        history = ledger.history(owners[0], args.stage, args.epoch)
    print(reports.history_text(history))
    return 0


def load_pipeline(spec: str) -> Pipeline:
    """An example by name (``bank``) or ``module:attribute`` naming a Pipeline or a function
    that returns one."""
    examples = registry()
    if spec in examples:
        return examples[spec]()
    if ":" not in spec:
        raise UsageError(
            f"unknown pipeline {spec!r}: give an example ({', '.join(examples)}) "
            "or module:attribute"
        )
    module_name, attr = spec.split(":", 1)
    try:
        target = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as err:
        raise UsageError(f"cannot load pipeline {spec!r}: {err}") from err
    pipeline = target() if callable(target) and not isinstance(target, Pipeline) else target
    if not isinstance(pipeline, Pipeline):
        raise UsageError(f"{spec!r} is a {type(pipeline).__name__}, not a Pipeline")
    return pipeline


def runtime(args: argparse.Namespace) -> Runtime:
    from pipelines.spark import quiet, spark_session

    pipeline = load_pipeline(args.pipeline_def)
    ledger = Ledger(ledger_path(args.ledger), lock_timeout=args.lock_timeout)
    spark = spark_session(args.spark)
    quiet(spark)
    return Runtime(
        pipeline,
        ledger,
        spark,
        data_path(args.data),
        on_round=lambda *progress: print(f"    {describe_round(*progress)}", flush=True),
    )


def registered_ledger(args: argparse.Namespace) -> tuple[Pipeline, Ledger]:
    """The pipeline and its ledger, registered, without starting Spark."""
    pipeline = load_pipeline(args.pipeline_def)
    ledger = Ledger(ledger_path(args.ledger), lock_timeout=args.lock_timeout)
    pipeline.register(ledger)
    return pipeline, ledger


def cmd_run(args: argparse.Namespace) -> int:
    rt = runtime(args)
    started = time.perf_counter()
    results = rt.run(lambda r: print(f"  {rt.pipeline.name}.{r.describe()}", flush=True))
    print(f"{len(results)} stage run(s) in {time.perf_counter() - started:.1f}s")
    waiting = [f"{s} epoch {t}" for s, t in rt.pending()]
    if waiting:
        print(
            f"waiting: {', '.join(waiting[:8])}{' ...' if len(waiting) > 8 else ''} "
            "(epochgate status says who holds them)"
        )
    return 0


def cmd_backfill(args: argparse.Namespace) -> int:
    if args.last < args.first:
        raise UsageError(f"--to {args.last} is before --from {args.first}")
    rt = runtime(args)
    started = time.perf_counter()
    epochs = list(range(args.first, args.last + 1))
    results = rt.backfill(
        args.stage, epochs, lambda r: print(f"  {rt.pipeline.name}.{r.describe()}", flush=True)
    )
    print(
        f"backfilled {args.stage} epochs {args.first}-{args.last}: {len(results)} stage run(s) "
        f"in {time.perf_counter() - started:.1f}s"
    )
    return 0


def cmd_send(args: argparse.Namespace) -> int:
    rt = runtime(args)
    handle = rt.input(args.source, args.worker)
    epoch = handle.epoch
    result = handle.send(args.file)
    print(
        f"sent {args.file} to {args.source} worker {args.worker} at epoch {epoch} "
        f"(batch #{result.batch_id})"
    )
    return 0


def cmd_correct(args: argparse.Namespace) -> int:
    rt = runtime(args)
    result = rt.input(args.source, args.worker).correct(args.epoch, args.file)
    print(
        f"corrected {args.source} worker {args.worker} at epoch {args.epoch} with {args.file} "
        f"(batch #{result.batch_id}); `epochgate run` re-runs what read the replaced data"
    )
    return 0


def cmd_advance(args: argparse.Namespace) -> int:
    pipeline, ledger = registered_ledger(args)
    ledger.advance(pipeline.name, args.source, args.worker, args.epoch, seal=True)
    now = ledger.worker_time(pipeline.name, args.source, args.worker)
    print(f"{args.source} worker {args.worker} is at epoch {'closed' if now is None else now}")
    return 0


def cmd_close(args: argparse.Namespace) -> int:
    pipeline, ledger = registered_ledger(args)
    ledger.close(pipeline.name, args.source, args.worker)
    print(f"{args.source} worker {args.worker} is closed")
    return 0


def cmd_clock(args: argparse.Namespace) -> int:
    pipeline, ledger = registered_ledger(args)
    now = datetime.now(UTC)
    if args.now:
        try:
            now = datetime.fromisoformat(args.now)
        except ValueError as err:
            raise UsageError(f"--now {args.now!r} is not an ISO 8601 time: {err}") from err
        if now.tzinfo is None:
            raise UsageError(f"--now {args.now!r} has no time zone (e.g. 2026-11-21T10:00Z)")
    tick = close_epochs(ledger, pipeline, now)
    for line in tick.lines():
        print(line)
    if not tick.waiting and not tick.closed:
        print(f"{pipeline.name}: every source is closed by its workers (advance/close)")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from pipelines.examples.demo import run_demo

    summary = run_demo(
        Path(args.home),
        epochs=args.epochs,
        rows=args.rows,
        accounts=args.accounts,
        seed=args.seed,
        spark_master=args.spark,
    )
    return 0 if summary.verified else 1


def cmd_demo_data(args: argparse.Namespace) -> int:
    from pipelines.examples.bank_data import generate

    data = generate(
        Path(args.out), epochs=args.epochs, rows=args.rows, accounts=args.accounts, seed=args.seed
    )
    print(f"wrote {args.epochs} epochs under {data.root} (late file at epoch {data.late_epoch})")
    return 0


def cmd_spark(args: argparse.Namespace) -> int:
    from pipelines import connect_server

    if args.spark_command == "start":
        connect_server.start(args.port, master=args.master, timeout=args.timeout)
    elif args.spark_command == "stop":
        connect_server.stop(args.port, timeout=args.timeout)
    else:
        for found in connect_server.statuses(args.port):
            print(found.describe())
    return 0


def _spark_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from pipelines.connect_server import DEFAULT_MASTER, DEFAULT_PORT

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
    """The commands that drive a pipeline: run, backfill, send, correct, advance, close."""
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
        help=f"ledger file (default: ${LEDGER_ENV} or .epochgate/ledger.duckdb)",
    )
    connection.add_argument(
        "--lock-timeout",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="how long to wait for another process holding the ledger (default 60)",
    )
    common = argparse.ArgumentParser(add_help=False, parents=[connection])
    common.add_argument("--pipeline", metavar="NAME", help="only this pipeline")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    status = commands.add_parser(
        "status", parents=[common], help="where every stage stands, and who holds waiting epochs"
    )
    status.add_argument("--json", action="store_true", help="print JSON instead of a table")
    status.set_defaults(handler=cmd_status)

    ledger = commands.add_parser("ledger", help="inspect the progress ledger")
    ledger_commands = ledger.add_subparsers(dest="ledger_command", metavar="COMMAND", required=True)
    verify = ledger_commands.add_parser(
        "verify", parents=[common], help="recompute counts from the log and compare"
    )
    verify.set_defaults(handler=cmd_verify)
    history = ledger_commands.add_parser(
        "history",
        parents=[common],
        help="batches, message attempts and runs of one stage and epoch",
    )
    history.add_argument("stage")
    history.add_argument("epoch", type=parse_time, help="an epoch, or EPOCH,ROUND")
    history.set_defaults(handler=cmd_history)

    engine = argparse.ArgumentParser(add_help=False, parents=[connection])
    engine.add_argument(
        "--data", metavar="DIR", help="data directory (default: $EPOCHGATE_DATA or .epochgate/data)"
    )
    engine.add_argument(
        "--spark",
        metavar="MASTER",
        help="local[N], a master URL or sc://host:port (default: $EPOCHGATE_SPARK or local[2])",
    )
    engine.add_argument(
        "-p",
        "--pipeline",
        dest="pipeline_def",
        default="bank",
        metavar="PIPELINE",
        help="an example name or module:attribute (default: bank)",
    )

    _engine_commands(commands, engine)

    demo = commands.add_parser("demo", help="run the bank example end to end and check it")
    add_size_options(demo)
    demo.add_argument(
        "--home",
        default=".epochgate/demo",
        help="where the demo keeps its state (default .epochgate/demo; replaced)",
    )
    demo.add_argument("--spark", metavar="MASTER", help="Spark master (default local[2])")
    demo.set_defaults(handler=cmd_demo)
    demo_data = commands.add_parser("demo-data", help="write seeded bank inputs")
    add_size_options(demo_data)
    demo_data.add_argument("--out", default=".epochgate/demo-data", help="output directory")
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
    try:
        return handler(args)
    except EpochgateError as err:
        print(f"epochgate: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
