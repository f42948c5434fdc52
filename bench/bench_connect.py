"""Start cost per run: a new local SparkSession vs a Spark Connect client to a running server.

    .venv/bin/python bench/bench_connect.py [--runs 5] [--port 0]

Each run is a fresh Python process, timed from its launch until ``spark.range(1).count()``
has returned in it: (a) with a new local session (``local[2]``, a JVM of its own), (b) with a
Spark Connect client against a server this benchmark starts once beforehand (on a free
127.0.0.1 port unless ``--port`` names one; its pid file and log in a temporary state
directory). Prints the server's one-off start time, the median of each side and their ratio,
and stops the server by its pid at the end, even when a run fails.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pipelines import connect_server
from pipelines.settings import HOME_ENV

CHILD = """
import sys
from pipelines.spark import spark_session
spark = spark_session(sys.argv[1])
assert spark.range(1).count() == 1
print("counted", flush=True)
spark.stop()
"""


def one_run(master: str) -> float:
    """Seconds from launching a Python process until its first count has returned."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EPOCHGATE_")}
    started = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, "-W", "ignore", "-c", CHILD, master],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    line = child.stdout.readline()
    took = time.perf_counter() - started
    _, err = child.communicate(timeout=120)
    if line.strip() != "counted" or child.returncode != 0:
        tail = "\n".join(err.strip().splitlines()[-5:])
        raise SystemExit(f"a run on {master} failed (exit {child.returncode}):\n{tail}")
    return took


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="runs per side (default 5)")
    parser.add_argument("--port", type=int, default=0, help="server port (default: a free one)")
    args = parser.parse_args()
    port = args.port or free_port()

    with tempfile.TemporaryDirectory(prefix="bench-connect-") as tmp:
        os.environ[HOME_ENV] = str(Path(tmp) / "home")
        local = [one_run("local[2]") for _ in range(args.runs)]
        print(f"local session:  {', '.join(f'{s:.2f}' for s in local)} s", flush=True)
        started = time.perf_counter()
        try:
            server = connect_server.start(port, echo=lambda _: None)
            print(f"server start:   {time.perf_counter() - started:.1f} s (once, pid {server.pid})")
            remote = [one_run(server.url) for _ in range(args.runs)]
            print(f"connect client: {', '.join(f'{s:.2f}' for s in remote)} s", flush=True)
        finally:
            connect_server.stop(port, echo=print)
    a, b = statistics.median(local), statistics.median(remote)
    print(f"median of {args.runs}: local session {a:.2f} s, Spark Connect client {b:.2f} s")
    print(f"ratio local / connect: {a / b:.1f}x")


if __name__ == "__main__":
    main()
