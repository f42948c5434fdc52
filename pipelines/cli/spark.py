"""``epochgate spark start|stop|status``: a Spark Connect server on this machine."""

from __future__ import annotations

import argparse

from pipelines.cli.options import Commands, command, group, seconds


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


def add_commands(commands: Commands) -> None:
    from pipelines.spark.connect_server import DEFAULT_MASTER, DEFAULT_PORT

    spark = command(commands, "spark", "a local Spark Connect server (start, stop, status)")
    actions = group(spark, "spark")
    port = argparse.ArgumentParser(add_help=False)
    port.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"port on 127.0.0.1 (default {DEFAULT_PORT})"
    )
    start = command(
        actions,
        "start",
        "start a server and print its sc:// URL",
        handler=cmd_spark,
        parents=[port],
    )
    start.add_argument(
        "--master", default=DEFAULT_MASTER, help=f"the server's master (default {DEFAULT_MASTER})"
    )
    start.add_argument(
        "--timeout", type=seconds, default=120.0, metavar="SECONDS", help="wait (default 120)"
    )
    stop = command(actions, "stop", "stop the server by its pid", handler=cmd_spark, parents=[port])
    stop.add_argument(
        "--timeout",
        type=seconds,
        default=30.0,
        metavar="SECONDS",
        help="wait after SIGTERM before SIGKILL (default 30)",
    )
    status = command(actions, "status", "whether a server runs, its pid and URL", handler=cmd_spark)
    status.add_argument("--port", type=int, help="only this port (default: every known one)")
