"""Start cost per run: a new local SparkSession vs a Spark Connect client to a running server.

    .venv/bin/python bench/bench_connect.py            # BENCH_SIZE=fast unless set
    BENCH_SIZE=full .venv/bin/python bench/bench_connect.py [--runs 5] [--port 0]

Each run is a fresh Python process, timed from its launch until ``spark.range(1).count()``
has returned in it: (a) with a new local session (``local[2]``, a JVM of its own), (b) with a
Spark Connect client against a server this benchmark starts once beforehand (on a free
127.0.0.1 port unless ``--port`` names one; its pid file and log in a temporary state
directory). Runs per side: 5 in the full form, 3 in the fast form. Prints each run, the
server's one-off start time, the median and spread of each side and the ratio of the medians
(no goal is set), and stops the server by its pid at the end, even when a run fails. The
figures go to the ``bench_connect`` section of ``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from results_file import chosen_size, figure_line, section, spread, write_section
from scratch import scratch

from pipelines.settings import HOME_ENV
from pipelines.spark import connect_server

BENCH = Path(__file__).resolve().parent
SIZES = {"fast": 3, "full": 5}
"""Runs per side."""

CHILD = """
import sys
from pipelines.spark.session import spark_session
spark = spark_session(sys.argv[1])
assert spark.range(1).count() == 1
print("counted", flush=True)
spark.stop()
"""


def one_run(master: str) -> float:
    """Seconds from launching a Python process until its first count has returned."""
    # The home stays: a Connect client finds its server's token there.
    env = {k: v for k, v in os.environ.items() if k == HOME_ENV or not k.startswith("EPOCHGATE_")}
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


@dataclass(frozen=True)
class Figures:
    """Seconds of each run on each side, and of the server's start."""

    local: list[float]
    server_start: float
    remote: list[float]

    @property
    def ratio(self) -> float:
        return statistics.median(self.local) / statistics.median(self.remote)

    def lines(self) -> list[str]:
        """The figures as printed and written."""
        return [
            f"new local session (local[2], a JVM of its own): {spread(self.local)}",
            f"Spark Connect client to a running server: {spread(self.remote)}",
            f"Spark Connect server start: {self.server_start:.1f}s (once, before its runs)",
            figure_line(
                "ratio local / connect", self.ratio, None, unit="x", places=1, why="of the medians"
            ),
        ]


def measure(runs: int, port: int) -> Figures:
    """``runs`` runs on each side, the server started on ``port`` between them and stopped by
    its pid after them, even when a run fails."""
    local = [one_run("local[2]") for _ in range(runs)]
    print(f"local session:  {', '.join(f'{s:.2f}' for s in local)} s", flush=True)
    started = time.perf_counter()
    try:
        server = connect_server.start(port, echo=lambda _: None)
        start = time.perf_counter() - started
        print(f"server start:   {start:.1f} s (once, pid {server.pid})", flush=True)
        remote = [one_run(server.url) for _ in range(runs)]
        print(f"connect client: {', '.join(f'{s:.2f}' for s in remote)} s", flush=True)
    finally:
        connect_server.stop(port, echo=print)
    found = Figures(local, start, remote)
    for line in found.lines():
        print(line, flush=True)
    return found


def connect_section(found: Figures, size_name: str) -> str:
    return section(
        "bench_connect: start cost per run, new local session vs Spark Connect client",
        [
            f"size: {size_name}; {len(found.local)} runs per side, each a fresh Python process "
            "timed from its launch until its first count has returned",
            "figures: median over the runs (spread: fastest to slowest run); the ratio is of "
            "the medians from this run",
        ],
        found.lines(),
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, help="runs per side (default: the size's)")
    parser.add_argument("--port", type=int, default=0, help="server port (default: a free one)")
    parser.add_argument("--results", type=Path, default=BENCH / "RESULTS.md")
    args = parser.parse_args(argv)
    name, runs = chosen_size(SIZES)
    runs = args.runs or runs
    port = args.port or free_port()
    print(f"connect ({name}: {runs} runs per side)", flush=True)
    with scratch("bench-connect-") as tmp:
        os.environ[HOME_ENV] = str(Path(tmp) / "home")
        found = measure(runs, port)
    write_section(args.results, "bench_connect", connect_section(found, name))
    print(f"written: {args.results}")


if __name__ == "__main__":
    main()
