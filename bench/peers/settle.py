"""Let the machine settle before a tool's run: the work of the run before (a process of GBs
exiting, the kernel reclaiming its memory) must not fall on the next tool's seconds.

A tool's seconds are measured in a process of its own, one tool after another. Right after a
heavy one (Pathway's watermark form holds over 1 GB and 6 GB at the large size), the
machine's cores stay busy for a while; the tool run next always pays for it unless the runner
waits. ``settle`` waits until the cores are nearly idle over a short window, or gives up after
a bound, so every tool starts on a quiet machine.
"""

from __future__ import annotations

import time
from pathlib import Path

STAT = Path("/proc/stat")
IDLE = 0.9
"""The share of the cores' time that must be idle over one window."""
WINDOW = 0.5
"""Seconds per look."""
QUIET_LOOKS = 2
"""Consecutive quiet windows needed."""
AT_MOST = 30.0
"""Seconds waited at most."""


def _cpu_times() -> tuple[int, int] | None:
    """(idle, total) jiffies of all cores since boot, or None where /proc/stat is not."""
    try:
        first = STAT.read_text().splitlines()[0].split()
    except OSError:
        return None
    values = [int(v) for v in first[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
    return idle, sum(values)


def settle(idle: float = IDLE, window: float = WINDOW, at_most: float = AT_MOST) -> float:
    """Wait until ``QUIET_LOOKS`` windows in a row had at least ``idle`` of the cores idle, at
    most ``at_most`` seconds; the seconds waited (0 where the cores cannot be read)."""
    started = time.monotonic()
    before = _cpu_times()
    if before is None:
        return 0.0
    quiet = 0
    while quiet < QUIET_LOOKS and time.monotonic() - started < at_most:
        time.sleep(window)
        now = _cpu_times()
        assert now is not None
        spent = now[1] - before[1]
        quiet = quiet + 1 if spent and (now[0] - before[0]) / spent >= idle else 0
        before = now
    return time.monotonic() - started
