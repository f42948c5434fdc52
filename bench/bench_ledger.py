"""Ledger costs: commit latency, ready() as history grows, and file size per epoch.

    .venv/bin/python bench/bench_ledger.py            # BENCH_SIZE=fast unless set
    BENCH_SIZE=full .venv/bin/python bench/bench_ledger.py [--closed 10000] [--stages 20]

Figures, each latency the median over the calls timed in one run with its spread (fastest to
slowest call) and its p99:
* commit latency of a 20-update batch: one process with a connection per commit, one process
  inside a held session (goal <= 5 ms), and 4 processes committing at once (a connection per
  commit);
* ready() latency on a 20-stage pipeline with 10 vs N closed epochs (the full form: 10,000;
  the fast form: 1,000), in a held session and with a connection per call, and the ratio of
  the medians, N against 10 (goal <= 1.5 each);
* ledger file size after N closed epochs, and growth per epoch under per-stage commits.

The N closed epochs are written one batch per epoch (the same counts and log rows an epoch's
stage runs leave, in one transaction) so that the benchmark finishes in minutes. The figures
go to the ``bench_ledger`` section of ``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from results_file import against, chosen_size, figure_line, section, spread, write_section
from scratch import scratch

from progress import GraphBuilder, Source, Target, Tracker, Update
from progress.ledger import Ledger, Origin

PIPELINE = "bench"
COMMIT_GOAL_MS = 5.0
"""The goal of a commit's median latency in a held session."""
READY_GOAL = 1.5
"""The goal of each ready() ratio, N closed epochs against 10."""
PROCESSES = 4
"""Processes committing at once."""
BENCH = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Size:
    closed: int
    """Closed epochs written for the late ready() figures and the file size."""
    commits: int
    """Commits timed with a connection per commit, and by each of the processes at once."""
    session_commits: int
    """Commits timed in a held session."""
    ready_calls: int
    """ready() calls timed in a session (a tenth of them, at least 20, with a connection each)."""
    extra: int
    """Epochs of per-stage commits for the growth figure."""
    stages: int = 20


SIZES = {
    "fast": Size(closed=1_000, commits=50, session_commits=200, ready_calls=100, extra=50),
    "full": Size(closed=10_000, commits=100, session_commits=500, ready_calls=200, extra=200),
}


def chain(stages: int) -> GraphBuilder:
    b = GraphBuilder()
    b.add_node("src", inputs=0, outputs=1, workers=2)
    previous = Source("src")
    for k in range(stages):
        b.add_node(f"s{k:02d}", inputs=1, outputs=1, workers=0)
        b.add_edge(previous, Target(f"s{k:02d}"))
        previous = Source(f"s{k:02d}")
    return b


def twenty_updates(stages: int, i: int) -> list[Update]:
    """+1 at ten inputs at ``i``, -1 at the same inputs at ``i - 1``: counts stay small."""
    out: list[Update] = [(Target(f"s{k:02d}"), i, 1) for k in range(10 % (stages + 1))]
    if i:
        out += [(Target(f"s{k:02d}"), i - 1, -1) for k in range(10 % (stages + 1))]
    return out


def latency_line(label: str, xs: list[float], goal: str = "") -> str:
    """``xs`` (seconds) in ms: median, spread and p99, and the goal when there is one."""
    ms = [x * 1000 for x in xs]
    line = f"{label}: {spread(ms, ' ms', 2)}, p99 {percentile(ms, 0.99):.2f} ms"
    return f"{line} ({goal})" if goal else line


def percentile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def commit_latencies(
    ledger: Ledger, stages: int, n: int, prefix: str, start: int = 0
) -> list[float]:
    out = []
    for i in range(start, start + n):
        t = time.perf_counter()
        ledger.commit(PIPELINE, twenty_updates(stages, i), key=f"{prefix}:{i}")
        out.append(time.perf_counter() - t)
    return out


def child(path: str, stages: int, n: int, name: str) -> None:
    """One of the concurrent committers: prints its latencies in ms, one per line."""
    ledger = Ledger(path, lock_timeout=600, linger=0)
    for x in commit_latencies(ledger, stages, n, name):
        print(f"{x * 1000:.3f}")


def epoch_batch(tracker: Tracker, stages: int, epoch: int) -> list[Update]:
    """What one epoch leaves in the log: both source workers send, every stage runs. (The
    workers' capabilities stay behind the filled history and are advanced past it at the end.)"""
    batch: list[Update] = [(Target("s00"), epoch, 1), (Target("s00"), epoch, 1)]
    tracker.apply(batch)
    for k in range(stages):
        run = tracker.stage_batch(f"s{k:02d}", epoch)
        tracker.apply(run)
        batch += run
    return batch


def run_epochs_per_stage(ledger: Ledger, stages: int, first: int, n: int) -> None:
    """Real per-action commits: each worker's send and advance, then each stage's run."""
    with ledger.session():
        for epoch in range(first, first + n):
            for w in range(2):
                ledger.send(PIPELINE, "src", w, key=f"send:{epoch}:{w}")
                ledger.advance(PIPELINE, "src", w, epoch + 1)
            tracker = ledger.tracker(PIPELINE)
            for k in range(stages):
                stage = f"s{k:02d}"
                run = tracker.stage_batch(stage, epoch)
                tracker.apply(run)
                ledger.commit(
                    PIPELINE, run, key=f"run:{stage}:{epoch}", origin=Origin.stage(stage, epoch)
                )


def ready_latency(
    ledger: Ledger, stage: str, epoch: int, n: int = 200
) -> tuple[list[float], list[float]]:
    """Seconds of each call: ``n`` in a held session, then a tenth as many (at least 20) with
    a connection per call."""
    inside = []
    with ledger.session():
        for _ in range(n):
            t = time.perf_counter()
            ledger.ready(PIPELINE, stage, epoch)
            inside.append(time.perf_counter() - t)
    outside = []
    for _ in range(max(20, n // 10)):
        t = time.perf_counter()
        ledger.ready(PIPELINE, stage, epoch)
        outside.append(time.perf_counter() - t)
    return inside, outside


@dataclass(frozen=True)
class Figures:
    """One run's figures: seconds of each call timed, and the ledger file's bytes."""

    size: Size
    per_commit: list[float]
    session: list[float]
    concurrent: list[float]
    early: tuple[list[float], list[float]]
    """ready() with 10 closed epochs: in a held session, with a connection per call."""
    late: tuple[list[float], list[float]]
    """ready() with ``size.closed`` closed epochs, the same two ways."""
    file_bytes: int
    grown_bytes: int
    verified: bool
    batches: int

    def ratios(self) -> tuple[float, float]:
        """ready()'s median with N closed epochs over that with 10: in a session, outside."""
        return (
            statistics.median(self.late[0]) / statistics.median(self.early[0]),
            statistics.median(self.late[1]) / statistics.median(self.early[1]),
        )

    def lines(self) -> list[str]:
        """The figures as printed and written."""
        n, stages = self.size.closed, self.size.stages
        held = statistics.median(self.session) * 1000
        lines = [
            latency_line("commit, 20 updates, one process, connection per commit", self.per_commit),
            latency_line(
                "commit, 20 updates, one process, held session",
                self.session,
                against(held, COMMIT_GOAL_MS, unit=" ms"),
            ),
            latency_line(
                f"commit, 20 updates, {PROCESSES} processes at once (connection per commit)",
                self.concurrent,
            ),
        ]
        for label, (inside, outside) in (("10", self.early), (f"{n:,}", self.late)):
            lines += [
                latency_line(
                    f"ready(), {stages} stages, {label} closed epochs, in a session", inside
                ),
                latency_line(
                    f"ready(), {stages} stages, {label} closed epochs, own connection", outside
                ),
            ]
        for how, ratio in zip(("in a session", "own connection"), self.ratios(), strict=True):
            lines.append(
                figure_line(
                    f"ready() ratio, {n:,} vs 10 closed epochs, {how}",
                    ratio,
                    READY_GOAL,
                    places=2,
                    why="of the medians",
                )
            )
        extra = self.size.extra
        lines += [
            f"ledger file after {n:,} epochs: {self.file_bytes / 2**20:.1f} MiB "
            f"({self.file_bytes / n / 1024:.2f} KiB per epoch, written one batch per epoch)",
            f"growth under per-stage commits ({stages + 4} batches per epoch): "
            f"{self.grown_bytes / extra / 1024:.2f} KiB per epoch over {extra} epochs",
            f"verify after the run: {'ok' if self.verified else 'FAILED'} ({self.batches} batches)",
        ]
        return lines


def concurrent_commits(path: Path, size: Size) -> list[float]:
    """Seconds of each commit of ``PROCESSES`` processes committing at once."""
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--stages",
                str(size.stages),
                "--child",
                str(path),
                str(size.commits),
                f"p{k}",
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        for k in range(PROCESSES)
    ]
    found = [float(x) / 1000 for p in procs for x in p.communicate()[0].split()]
    failed = [p.returncode for p in procs if p.returncode != 0]
    if failed or len(found) != PROCESSES * size.commits:
        raise SystemExit(f"a committing process failed (exits {failed}); no figures written")
    return found


def run(size: Size, root: Path) -> Figures:
    """Every figure of ``size``, in ledger files under ``root``, printed as it comes."""
    stages = size.stages
    path = root / "ledger.duckdb"
    ledger = Ledger(path, linger=0)
    graph = chain(stages).compile()
    ledger.register(PIPELINE, graph)

    per_commit = commit_latencies(ledger, stages, size.commits, "single")
    with ledger.session():
        session = commit_latencies(ledger, stages, size.session_commits, "session")
    print("commits timed", flush=True)
    concurrent = concurrent_commits(path, size)
    print(f"{PROCESSES} processes committed at once", flush=True)

    path2 = root / "history.duckdb"
    ledger = Ledger(path2, linger=0)
    ledger.register(PIPELINE, graph)
    run_epochs_per_stage(ledger, stages, 0, 10)
    last = f"s{stages - 1:02d}"
    early = ready_latency(ledger, last, 10, size.ready_calls)
    tracker = ledger.tracker(PIPELINE)
    shown = time.perf_counter()
    with ledger.session():
        for epoch in range(10, size.closed):
            batch = epoch_batch(tracker, stages, epoch)
            ledger.commit(PIPELINE, batch, key=f"epoch:{epoch}")
            if time.perf_counter() - shown > 10:
                shown = time.perf_counter()
                print(f"  ... writing closed epochs: {epoch}/{size.closed}", flush=True)
        for w in range(2):
            ledger.advance(PIPELINE, "src", w, size.closed)
    late = ready_latency(ledger, last, size.closed, size.ready_calls)
    file_bytes = path2.stat().st_size
    run_epochs_per_stage(ledger, stages, size.closed, size.extra)
    grown = path2.stat().st_size - file_bytes
    report = ledger.verify()
    found = Figures(
        size,
        per_commit,
        session,
        concurrent,
        early,
        late,
        file_bytes,
        grown,
        report.ok,
        report.batches,
    )
    for line in found.lines():
        print(line, flush=True)
    return found


def ledger_section(found: Figures, size_name: str) -> str:
    size = found.size
    return section(
        "bench_ledger: commit latency, ready() as history grows, file size",
        [
            f"size: {size_name}; a chain of {size.stages} stages; commits timed: "
            f"{size.commits} with a connection each, {size.session_commits} in a held session, "
            f"{size.commits} by each of {PROCESSES} processes at once; ready() timed "
            f"{size.ready_calls} times in a session and {max(20, size.ready_calls // 10)} with "
            "a connection each, at 10 and at N closed epochs",
            "latencies: median over the calls (spread: fastest to slowest call) and p99; the "
            "ratios are of medians from this run",
        ],
        found.lines(),
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--closed", type=int, help="closed epochs, N (default: the size's)")
    parser.add_argument("--stages", type=int, default=20)
    parser.add_argument("--results", type=Path, default=BENCH / "RESULTS.md")
    parser.add_argument("--child", nargs=3, metavar=("PATH", "N", "NAME"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child[0], args.stages, int(args.child[1]), args.child[2])
        return
    name, size = chosen_size(SIZES)
    size = Size(
        args.closed or size.closed,
        size.commits,
        size.session_commits,
        size.ready_calls,
        size.extra,
        args.stages,
    )
    print(f"ledger ({name}: {size})", flush=True)
    with scratch("bench-ledger-") as tmp:
        found = run(size, Path(tmp))
    write_section(args.results, "bench_ledger", ledger_section(found, name))
    print(f"written: {args.results}")


if __name__ == "__main__":
    main()
