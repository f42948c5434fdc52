"""``epochgate sail start|stop|status``: a Sail server on this machine, for ``--spark sail``."""

from __future__ import annotations

import argparse

from pipelines.cli.options import Commands, command, group, seconds


def cmd_sail(args: argparse.Namespace) -> int:
    from pipelines.spark import sail

    if args.sail_command == "start":
        sail.start(args.port, mode=args.mode, timeout=args.timeout)
    elif args.sail_command == "stop":
        sail.stop(args.port, timeout=args.timeout)
    else:
        for found in sail.statuses(args.port):
            print(found.describe())
    return 0


def add_commands(commands: Commands) -> None:
    from pipelines.spark.sail import DEFAULT_PORT, LOCAL, MODES

    sail = command(
        commands,
        "sail",
        "a local Sail server that --spark sail uses (start, stop, status)",
    )
    actions = group(sail, "sail")
    port = argparse.ArgumentParser(add_help=False)
    port.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"port on 127.0.0.1 (default {DEFAULT_PORT})"
    )
    start = command(
        actions,
        "start",
        "start a server that outlives the command and print its sc:// URL",
        handler=cmd_sail,
        parents=[port],
    )
    start.add_argument(
        "--mode",
        choices=MODES,
        default=LOCAL,
        help=f"Sail's mode (default {LOCAL}; --spark sail-local-cluster uses a local-cluster one)",
    )
    start.add_argument(
        "--timeout", type=seconds, default=60.0, metavar="SECONDS", help="wait (default 60)"
    )
    stop = command(actions, "stop", "stop the server by its pid", handler=cmd_sail, parents=[port])
    stop.add_argument(
        "--timeout",
        type=seconds,
        default=30.0,
        metavar="SECONDS",
        help="wait after SIGTERM before SIGKILL (default 30)",
    )
    status = command(
        actions, "status", "whether a server runs, its pid, mode and URL", handler=cmd_sail
    )
    status.add_argument("--port", type=int, help="only this port (default: every known one)")
