"""Tracker throughput on a 50-stage graph with fan-in and a feedback path.

Prints updates applied per second, the median cost of ``ready()``, and the ratio of the
per-update cost with 10,000 closed epochs behind the tracker to that with 10. Every figure is
the median of several measured windows of one run.

    .venv/bin/python bench/bench_tracker.py [--closed 10000] [--windows 5]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable

from progress import (
    Delay,
    GraphBuilder,
    InputHandle,
    Source,
    Target,
    Tracker,
    Update,
    input_handle,
)

SOURCES = 3
WORKERS = 4
STAGES = 50


def build() -> tuple[Tracker, list[str]]:
    """Sources feed a layered DAG of stages; some stages read two upstream outputs (fan-in);
    ``state`` reads its own output of the previous epoch through ``carry`` (feedback)."""
    rnd = random.Random(7)
    b = GraphBuilder()
    outputs: list[Source] = []
    for s in range(SOURCES):
        b.add_node(f"src{s}", inputs=0, outputs=1, workers=WORKERS)
        outputs.append(Source(f"src{s}"))
    stages: list[str] = []
    b.add_node("state", inputs=2, outputs=1, workers=0)
    b.add_edge(outputs[0], Target("state", 0))
    b.add_node("carry", inputs=1, outputs=1, workers=0, summaries={(0, 0): [Delay(1)]})
    b.add_edge(Source("state"), Target("carry"))
    b.add_edge(Source("carry"), Target("state", 1))
    stages += ["state", "carry"]
    outputs.append(Source("state"))
    for k in range(STAGES - 2):
        name = f"stage{k:02d}"
        fan_in = 2 if k % 3 == 0 else 1
        b.add_node(name, inputs=fan_in, outputs=1, workers=0)
        for i, upstream in enumerate(rnd.sample(outputs[-8:], fan_in)):
            b.add_edge(upstream, Target(name, i))
        outputs.append(Source(name))
        stages.append(name)
    tracker = Tracker(b.compile())
    tracker.apply(tracker.initial_batch())
    return tracker, stages


class Workload:
    """Drives epochs: every source worker sends and advances, then every stage runs."""

    def __init__(self) -> None:
        self.tracker, self.stages = build()
        self.handles: list[InputHandle] = [
            input_handle(self.tracker, f"src{s}", w) for s in range(SOURCES) for w in range(WORKERS)
        ]
        self.epoch = 0
        self.updates = 0
        self.apply_seconds = 0.0
        self.ready_samples: list[float] = []

    def _apply(self, batch: list[Update]) -> None:
        start = time.perf_counter()
        self.tracker.apply(batch)
        self.apply_seconds += time.perf_counter() - start
        self.updates += len(batch)

    def run_epoch(self, sample_ready: bool = False) -> None:
        e = self.epoch
        for h in self.handles:
            self._apply(h.send())
            self._apply(h.advance_to(e + 1))
        ready: Callable[[str, int], bool] = self.tracker.ready
        for stage in self.stages:
            if sample_ready:
                start = time.perf_counter()
                ok = ready(stage, e)
                self.ready_samples.append(time.perf_counter() - start)
            else:
                ok = ready(stage, e)
            if not ok:
                raise AssertionError(
                    f"{stage} not ready for {e}: {self.tracker.blockers(stage, e)}"
                )
            self._apply(self.tracker.stage_batch(stage, e))
        self.epoch += 1

    def measure(self, epochs: int) -> float:
        """Seconds per update applied over the next ``epochs`` epochs."""
        self.updates, self.apply_seconds = 0, 0.0
        for _ in range(epochs):
            self.run_epoch()
        return self.apply_seconds / self.updates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--closed", type=int, default=10_000, help="closed epochs for the ratio")
    parser.add_argument("--windows", type=int, default=5, help="measured windows per figure")
    parser.add_argument("--window-epochs", type=int, default=40, help="epochs per window")
    args = parser.parse_args()

    w = Workload()
    print(
        f"graph: {SOURCES} sources x {WORKERS} workers, {len(w.stages)} stages (fan-in, feedback)"
    )
    for _ in range(10):
        w.run_epoch()
    early = [w.measure(args.window_epochs) for _ in range(args.windows)]
    started = time.perf_counter()
    last_print = started
    while w.epoch < args.closed:
        w.run_epoch()
        now = time.perf_counter()
        if now - last_print > 5:
            print(f"  ... closing epochs: {w.epoch}/{args.closed}", flush=True)
            last_print = now
    late = [w.measure(args.window_epochs) for _ in range(args.windows)]
    for _ in range(args.windows):
        w.run_epoch(sample_ready=True)

    per_update_early = statistics.median(early)
    per_update_late = statistics.median(late)
    print(f"updates applied per second (10 closed epochs):   {1 / per_update_early:>12,.0f}")
    print(f"updates applied per second ({args.closed:,} closed): {1 / per_update_late:>12,.0f}")
    ready_us = statistics.median(w.ready_samples) * 1e6
    print(f"median ready() cost:                              {ready_us:>10.2f} us")
    ratio = per_update_late / per_update_early
    print(f"per-update cost ratio, {args.closed:,} vs 10 closed epochs: {ratio:.3f}  (goal <= 1.2)")
    print(f"open pointstamps at the end: {len(w.tracker.pointstamps())}")


if __name__ == "__main__":
    main()
