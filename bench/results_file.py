"""``bench/RESULTS.md``: one section per bench script, each rewritten by its own script's run
and the others kept as they are.

    write_section(Path("bench/RESULTS.md"), "bench_peers", body)

A section lies between ``<!-- NAME:start -->`` and ``<!-- NAME:end -->``; a new one goes at the
end. ``about_this_run`` gives the lines every section starts with: machine, date, command.
"""

from __future__ import annotations

import os
import platform
import shlex
import statistics
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

HEADER = """# Benchmark results

Written by the bench scripts (`make bench`; `BENCH_SIZE=full make bench` for the full sizes).
Each script rewrites its own section from one run: its figures, the ratios against their
baselines from the same run, and each goal with whether it is met.
"""


def about_this_run() -> list[str]:
    """Machine, date and command of this run, as Markdown list items."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = ""
    try:
        kib = int(Path("/proc/meminfo").read_text().split()[1])
        memory = f", {kib / 2**20:.0f} GiB memory"
    except (OSError, ValueError, IndexError):
        pass
    size = os.environ.get("BENCH_SIZE", "")
    script = os.path.relpath(sys.argv[0]) if sys.argv else ""
    command = shlex.join([Path(sys.executable).name, script, *sys.argv[1:]])
    return [
        f"- machine: {os.cpu_count()} cores ({cpu}){memory}, {platform.system()} "
        f"{platform.release()}, Python {platform.python_version()}",
        f"- date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
        f"- command: `{f'BENCH_SIZE={size} ' if size else ''}{command}`",
    ]


def write_section(path: Path, name: str, body: str) -> None:
    """Replace (or add) the section ``name`` of the results file at ``path``."""
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    text = path.read_text() if path.exists() else HEADER
    section = f"{start}\n{body.strip()}\n{end}\n"
    if start in text and end in text:
        before, rest = text.split(start, 1)
        after = rest.split(end, 1)[1].lstrip("\n")
        text = before + section + ("\n" + after if after else "")
    else:
        text = text.rstrip("\n") + "\n\n" + section
    path.write_text(text)


def spread(xs: Sequence[float], unit: str = "s", digits: int = 2) -> str:
    """A figure over repeated runs as its median and spread (fastest to slowest).

    >>> spread([3.0, 2.5, 3.5])
    'median 3.00s (spread 2.50-3.50 over 3)'
    >>> spread([1.25], unit=" ms", digits=1)
    'median 1.2 ms (1 run)'
    """
    if not xs:
        raise ValueError("no runs to summarise")
    median = statistics.median(xs)
    if len(xs) == 1:
        return f"median {median:.{digits}f}{unit} (1 run)"
    low, high = f"{min(xs):.{digits}f}", f"{max(xs):.{digits}f}"
    return f"median {median:.{digits}f}{unit} (spread {low}-{high} over {len(xs)})"


def verdict(value: float, goal: float, *, at_most: bool = True) -> str:
    """``met`` or ``NOT met``: ``value`` against a goal it must stay at or under (or reach).

    >>> verdict(1.07, 1.05), verdict(0.9, 1.10), verdict(130.0, 50.0, at_most=False)
    ('NOT met', 'met', 'met')
    """
    ok = value <= goal if at_most else value >= goal
    return "met" if ok else "NOT met"
