"""The commands of a source's input workers: ``send`` and ``correct`` deliver a file, ``advance``
and ``close`` move a worker on."""

from __future__ import annotations

import argparse

from pipelines.cli.context import chosen, registering, runtime
from pipelines.cli.options import FILE, SOURCE, WORKER, Commands, command, engine
from pipelines.run.inputs import source_worker


def cmd_deliver(args: argparse.Namespace) -> int:
    """``send`` (at the worker's epoch) and ``correct`` (at ``args.epoch``, a past one)."""
    pipeline, ledger = chosen(args)
    source_worker(pipeline, args.source, args.worker)
    # A pipeline registered as it is delivers outside any transaction (with Spark, when the
    # file needs it, working while the ledger is free). The first delivery to a new or changed
    # pipeline registers it and delivers in one transaction: a file refused registers nothing.
    with registering(ledger, pipeline):
        handle = runtime(args, pipeline, ledger).input(args.source, args.worker)
        if args.epoch is None:
            epoch = handle.epoch
            result = handle.send(args.file, advance_to=args.advance_to)
        else:
            result = handle.correct(args.epoch, args.file)
    who = f"{args.source} worker {args.worker}"
    if args.epoch is None:
        print(f"sent {args.file} to {who} at epoch {epoch} (batch #{result.batch_id})")
        if args.advance_to is not None:
            print(f"{who} is at epoch {args.advance_to}")
    else:
        print(
            f"corrected {who} at epoch {args.epoch} with {args.file} (batch #{result.batch_id}); "
            "`epochgate run` re-runs what read the replaced data"
        )
    return 0


def cmd_move(args: argparse.Namespace) -> int:
    """``advance`` (to ``args.epoch``) and ``close`` (no epoch: for good)."""
    pipeline, ledger = chosen(args)
    source_worker(pipeline, args.source, args.worker)
    p = pipeline.name
    with ledger.atomic():  # registered only if the move commits
        pipeline.register(ledger)
        if args.epoch is None:
            ledger.close(p, args.source, args.worker)
        else:
            ledger.advance(p, args.source, args.worker, args.epoch, seal=True)
        now = ledger.worker_time(p, args.source, args.worker)
    state = "closed" if now is None else f"at epoch {now}"
    print(f"{args.source} worker {args.worker} is {state}")
    return 0


def add_commands(commands: Commands) -> None:
    send = command(
        commands,
        "send",
        "send a Parquet file to a source at its worker's epoch",
        handler=cmd_deliver,
        parents=[engine()],
    )
    SOURCE.add(send)
    FILE.add(send)
    WORKER.add(send)
    send.add_argument(
        "--advance-to",
        type=int,
        metavar="EPOCH",
        help="then declare the worker's epochs before EPOCH complete, in the same commit",
    )
    send.set_defaults(epoch=None)
    correct = command(
        commands,
        "correct",
        "replace what a source worker sent at a past epoch with a file (a revision)",
        handler=cmd_deliver,
        parents=[engine()],
    )
    correct.set_defaults(advance_to=None)
    SOURCE.add(correct)
    correct.add_argument("epoch", type=int, help="the past epoch whose input it replaces")
    FILE.add(correct)
    WORKER.add(correct)
    advance = command(
        commands,
        "advance",
        "declare a source worker's epochs before EPOCH complete",
        handler=cmd_move,
        parents=[engine()],
    )
    SOURCE.add(advance)
    advance.add_argument("epoch", type=int, help="the epoch the worker is at afterwards")
    WORKER.add(advance)
    close = command(
        commands,
        "close",
        "declare that nothing more will come from a source worker",
        handler=cmd_move,
        parents=[engine()],
    )
    SOURCE.add(close)
    WORKER.add(close)
    close.set_defaults(epoch=None)
