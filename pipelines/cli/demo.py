"""The bank example's commands: ``demo`` runs it end to end, ``demo-data`` writes its inputs."""

from __future__ import annotations

import argparse

from pipelines.cli.options import SPARK, Commands, command
from pipelines.examples.sizes import add_size_options
from pipelines.settings import DEMO_DATA_DIR, DEMO_DIR, HOME_ENV, absolute, state_dir


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


def add_commands(commands: Commands) -> None:
    demo = command(
        commands,
        "demo",
        "run the bank example end to end and check its outputs",
        handler=cmd_demo,
    )
    add_size_options(demo)
    demo.add_argument(
        "--home",
        help=f"where the demo keeps its state (default ${HOME_ENV}/{DEMO_DIR}; replaced)",
    )
    SPARK.add(demo)
    demo_data = command(
        commands,
        "demo-data",
        "write seeded inputs of the bank example",
        handler=cmd_demo_data,
    )
    add_size_options(demo_data)
    demo_data.add_argument("--out", help=f"output directory (default ${HOME_ENV}/{DEMO_DATA_DIR})")
