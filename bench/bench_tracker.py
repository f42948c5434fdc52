"""Tracker throughput on a 50-stage graph with fan-in and a feedback path.

    .venv/bin/python bench/bench_tracker.py            # BENCH_SIZE=fast unless set
    BENCH_SIZE=full .venv/bin/python bench/bench_tracker.py [--closed 10000] [--windows 5]

Prints updates applied per second with 10 closed epochs behind the tracker and with N (the full
form: 10,000; the fast form: 2,000), the cost of ``ready()``, and the ratio of the per-update
cost with N closed epochs to that with 10 (goal <= 1.2). Each throughput is the median over
several measured windows of one run, with its spread (slowest to fastest window); the
``ready()`` cost is the median over every call timed, with its spread; the ratio is of the two
medians. The figures go to the ``bench_tracker`` section of ``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from results_file import chosen_size, figure_line, section, spread, write_section

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
GOAL = 1.2
"""The goal of the per-update cost ratio, N closed epochs against 10."""
BENCH = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Size:
    closed: int
    """Closed epochs behind the tracker for the late figures."""
    windows: int
    """Measured windows per figure (and epochs whose ``ready()`` calls are timed)."""
    window_epochs: int
    """Epochs per measured window."""


SIZES = {
    "fast": Size(closed=2_000, windows=5, window_epochs=40),
    "full": Size(closed=10_000, windows=5, window_epochs=40),
}


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


@dataclass(frozen=True)
class Figures:
    """One run's figures: seconds per update of each window, early (10 closed epochs) and
    late (``closed``); seconds of each ``ready()`` call timed."""

    closed: int
    window_epochs: int
    early: list[float]
    late: list[float]
    ready: list[float]
    pointstamps: int

    @property
    def ratio(self) -> float:
        return statistics.median(self.late) / statistics.median(self.early)

    def lines(self) -> list[str]:
        """The figures as printed and written."""

        def rates(xs: Sequence[float]) -> str:
            return spread([1e-3 / x for x in xs], "k updates/s", 1)

        ready_us = [x * 1e6 for x in self.ready]
        return [
            f"updates applied per second, 10 closed epochs: {rates(self.early)}",
            f"updates applied per second, {self.closed:,} closed epochs: {rates(self.late)}",
            f"ready() cost: {spread(ready_us, ' us', 2)}",
            figure_line(
                f"per-update cost ratio, {self.closed:,} vs 10 closed epochs",
                self.ratio,
                GOAL,
                why="of the medians",
            ),
            f"open pointstamps at the end: {self.pointstamps}",
        ]


def run(size: Size) -> Figures:
    """Measure the early windows, close epochs up to ``size.closed``, measure the late windows
    and time ``ready()``; the figures, printed as they come."""
    w = Workload()
    print(
        f"graph: {SOURCES} sources x {WORKERS} workers, {len(w.stages)} stages (fan-in, feedback)"
    )
    for _ in range(10):
        w.run_epoch()
    early = [w.measure(size.window_epochs) for _ in range(size.windows)]
    started = time.perf_counter()
    last_print = started
    while w.epoch < size.closed:
        w.run_epoch()
        now = time.perf_counter()
        if now - last_print > 5:
            print(f"  ... closing epochs: {w.epoch}/{size.closed}", flush=True)
            last_print = now
    late = [w.measure(size.window_epochs) for _ in range(size.windows)]
    for _ in range(size.windows):
        w.run_epoch(sample_ready=True)
    found = Figures(
        size.closed, size.window_epochs, early, late, w.ready_samples, len(w.tracker.pointstamps())
    )
    for line in found.lines():
        print(line, flush=True)
    return found


def tracker_section(found: Figures, size_name: str) -> str:
    return section(
        "bench_tracker: the progress tracker on a 50-stage graph with fan-in and feedback",
        [
            f"size: {size_name}; {SOURCES} sources x {WORKERS} workers, {STAGES} stages",
            f"each throughput over {len(found.early)} windows of {found.window_epochs} epochs "
            "(median, spread: slowest to fastest window); ready() timed once per stage in "
            f"each of {len(found.early)} epochs (median, spread: fastest to slowest call)",
        ],
        found.lines(),
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--closed", type=int, help="closed epochs for the ratio (size's)")
    parser.add_argument("--windows", type=int, help="measured windows per figure (size's)")
    parser.add_argument("--window-epochs", type=int, help="epochs per window (size's)")
    parser.add_argument("--results", type=Path, default=BENCH / "RESULTS.md")
    args = parser.parse_args(argv)
    name, size = chosen_size(SIZES)
    size = Size(
        args.closed or size.closed,
        args.windows or size.windows,
        args.window_epochs or size.window_epochs,
    )
    print(f"tracker ({name}: {size})", flush=True)
    found = run(size)
    write_section(args.results, "bench_tracker", tracker_section(found, name))
    print(f"written: {args.results}")


if __name__ == "__main__":
    main()
