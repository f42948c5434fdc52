"""What one tool's run records: when each file arrived, when each epoch was complete, when the
tool emitted each epoch's output (and how many files had arrived then), and its peak memory."""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from peers.workloads import Feed


@dataclass
class Run:
    """One tool's run of one workload, as the driver reads it back (JSON)."""

    tool: str
    workload: str
    rows: int
    seconds: float
    """From the first file delivered to the last output emitted."""
    closed_at: dict[int, float]
    """Epoch -> seconds (since the first delivery) when its last file arrived."""
    emitted_at: dict[int, float]
    """Epoch -> seconds when its output was last emitted (its final, committed value)."""
    premature: list[int]
    """Epochs with output emitted before they were complete, or emitted and later retracted."""
    late_rows: int
    """Input rows the tool dropped as late (after it had closed their epoch)."""
    peak_rss: int
    """Bytes: the high-water resident sets of the tool's whole process tree (with Spark's JVM,
    or the Sail server)."""
    output: str
    phases: dict[str, float] = field(default_factory=dict)
    """Seconds spent in each part of the tool's own loop, where it has one (epochgate: sending
    the files, running the stages)."""

    @property
    def throughput(self) -> float:
        return self.rows / self.seconds if self.seconds else 0.0

    def latencies(self) -> list[float]:
        """Seconds from each epoch's completion to its committed output, for the epochs whose
        output was not emitted early."""
        return [
            self.emitted_at[e] - t
            for e, t in self.closed_at.items()
            if e in self.emitted_at and e not in self.premature and self.emitted_at[e] >= t
        ]

    def dump(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self)))

    @classmethod
    def load(cls, path: Path) -> Run:
        raw = json.loads(path.read_text())
        for name in ("closed_at", "emitted_at"):
            raw[name] = {int(k): v for k, v in raw[name].items()}
        return cls(**raw)


@dataclass
class Recorder:
    """Called by a tool's feeding code after each file is delivered (``delivered``) and by its
    output code for each epoch's output (``emitted``); safe to call from the tool's threads."""

    feed: Feed
    delivered_steps: int = 0
    started: float | None = None
    closed_at: dict[int, float] = field(default_factory=dict)
    emitted_at: dict[int, float] = field(default_factory=dict)
    premature: set[int] = field(default_factory=set)
    late_rows: int = 0
    phases: dict[str, float] = field(default_factory=dict)
    peak: int | None = None
    """The tree's peak memory when the tool's run ended (``stop``), before the bench gathers
    its output into one file."""
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> None:
        if self.started is None:
            self.started = time.perf_counter()

    def now(self) -> float:
        self.start()
        assert self.started is not None
        return time.perf_counter() - self.started

    def delivered(self) -> None:
        """One more step of the feed has been handed to the tool."""
        with self._lock:
            self.delivered_steps += 1
            at = self.now()
            for epoch, step in self.feed.closes.items():
                if step == self.delivered_steps:
                    self.closed_at[epoch] = at

    def emitted(self, epoch: int) -> None:
        """The tool has emitted (some of) epoch ``epoch``'s output."""
        with self._lock:
            self.emitted_at[epoch] = self.now()
            if self.delivered_steps < self.feed.closes.get(epoch, 0):
                self.premature.add(epoch)

    def spent(self, phase: str, seconds: float) -> None:
        self.phases[phase] = self.phases.get(phase, 0.0) + seconds

    def early(self, epoch: int) -> None:
        """The tool emitted output of ``epoch`` before the epoch was complete (seen from the
        tool's own logical time, or because it took that output back later)."""
        with self._lock:
            self.premature.add(epoch)

    def stop(self) -> None:
        """The tool's run has ended: its peak memory is read now, before the bench's own work
        of gathering the output into one file adds to it."""
        self.peak = peak_rss()

    def finish(self, tool: str, output: Path) -> Run:
        seconds = max([*self.emitted_at.values(), *self.closed_at.values(), 0.0])
        return Run(
            tool=tool,
            workload=self.feed.workload,
            rows=self.feed.rows,
            seconds=seconds,
            closed_at=dict(self.closed_at),
            emitted_at=dict(self.emitted_at),
            premature=sorted(self.premature),
            late_rows=self.late_rows,
            peak_rss=self.peak if self.peak is not None else peak_rss(),
            output=str(output),
            phases=dict(self.phases),
        )


def _high_water(pid: int | str) -> int:
    """VmHWM of a process in bytes (0 when it cannot be read)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


def tree(pid: int) -> list[int]:
    """``pid`` and every process under it: Spark's JVM under the launcher Spark starts, a Sail
    server under the thread that started it (``/proc/PID/task/*/children`` lists both)."""
    found, todo = [], [pid]
    while todo:
        here = todo.pop()
        found.append(here)
        todo += [c for c in _children(here) if c not in found]
    return found


def peak_rss() -> int:
    """The peak resident set of this process's whole tree, in bytes: the sum of each live
    process's high-water mark (this one, Spark's JVM, a Sail server). The peaks of different
    processes need not coincide, so this bounds the tree's peak from above."""
    if not Path("/proc/self/status").exists():
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return sum(_high_water(p) for p in tree(os.getpid()))
