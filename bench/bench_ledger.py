"""Ledger costs: commit latency, ready() as history grows, and file size per epoch.

    .venv/bin/python bench/bench_ledger.py [--closed 10000] [--stages 20]

Figures (medians of one run unless labelled p99):
* commit latency of a 20-update batch: one process with a connection per commit, one process
  inside a held session, and 4 processes committing at once (a connection per commit);
* ready() latency on a 20-stage pipeline with 10 vs N closed epochs, and their ratio;
* ledger file size after N closed epochs, and growth per epoch under per-stage commits.

The N closed epochs are written one batch per epoch (the same counts and log rows an epoch's
stage runs leave, in one transaction) so that the benchmark finishes in minutes.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from progress import GraphBuilder, Source, Target, Tracker, Update
from progress.ledger import Ledger, Origin

PIPELINE = "bench"


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
    median, p99 = statistics.median(xs) * 1000, percentile(xs, 0.99) * 1000
    return f"{label:<58} median {median:6.2f} ms  p99 {p99:7.2f} ms{goal}"


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
    ledger = Ledger(path, lock_timeout=600)
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


def ready_latency(ledger: Ledger, stage: str, epoch: int, n: int = 200) -> tuple[float, float]:
    """(median in a held session, median with a connection per call), in seconds."""
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
    return statistics.median(inside), statistics.median(outside)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--closed", type=int, default=10_000)
    parser.add_argument("--stages", type=int, default=20)
    parser.add_argument("--child", nargs=3, metavar=("PATH", "N", "NAME"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], args.stages, int(args.child[1]), args.child[2])
        return

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ledger.duckdb"
        ledger = Ledger(path)
        graph = chain(args.stages).compile()
        ledger.register(PIPELINE, graph)

        per_commit = commit_latencies(ledger, args.stages, 100, "single")
        with ledger.session():
            session = commit_latencies(ledger, args.stages, 500, "session")
        print(latency_line("commit, 20 updates, one process, connection per commit", per_commit))
        print(latency_line("commit, 20 updates, one process, held session", session, " (goal < 5)"))
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    __file__,
                    "--stages",
                    str(args.stages),
                    "--child",
                    str(path),
                    "100",
                    f"p{k}",
                ],
                stdout=subprocess.PIPE,
                text=True,
            )
            for k in range(4)
        ]
        concurrent = [float(x) / 1000 for p in procs for x in p.communicate()[0].split()]
        print(latency_line("commit, 20 updates, 4 processes at once", concurrent))

        path2 = Path(tmp) / "history.duckdb"
        ledger = Ledger(path2)
        ledger.register(PIPELINE, graph)
        run_epochs_per_stage(ledger, args.stages, 0, 10)
        last = f"s{args.stages - 1:02d}"
        early = ready_latency(ledger, last, 10)
        tracker = ledger.tracker(PIPELINE)
        shown = time.perf_counter()
        with ledger.session():
            for epoch in range(10, args.closed):
                batch = epoch_batch(tracker, args.stages, epoch)
                ledger.commit(PIPELINE, batch, key=f"epoch:{epoch}")
                if time.perf_counter() - shown > 10:
                    shown = time.perf_counter()
                    print(f"  ... writing closed epochs: {epoch}/{args.closed}", flush=True)
            for w in range(2):
                ledger.advance(PIPELINE, "src", w, args.closed)
        late = ready_latency(ledger, last, args.closed)
        for label, (inside, outside) in (("10", early), (f"{args.closed:,}", late)):
            print(
                f"ready(), {args.stages} stages, {label} closed epochs: {inside * 1000:6.2f} ms in "
                f"a session, {outside * 1000:6.2f} ms with its own connection"
            )
        print(
            f"ready() ratio, {args.closed:,} vs 10 closed epochs: {late[0] / early[0]:.2f} in a "
            f"session, {late[1] / early[1]:.2f} with its own connection  (goal <= 1.5)"
        )
        size = path2.stat().st_size
        print(
            f"ledger file after {args.closed:,} epochs: {size / 2**20:.1f} MiB "
            f"({size / args.closed / 1024:.2f} KiB per epoch, written one batch per epoch)"
        )
        extra = 200
        run_epochs_per_stage(ledger, args.stages, args.closed, extra)
        grown = path2.stat().st_size - size
        print(
            f"growth under per-stage commits ({args.stages + 4} batches per epoch): "
            f"{grown / extra / 1024:.2f} KiB per epoch over {extra} epochs"
        )
        report = ledger.verify()
        print(f"verify after the run: {'ok' if report.ok else 'FAILED'} ({report.batches} batches)")


if __name__ == "__main__":
    main()
