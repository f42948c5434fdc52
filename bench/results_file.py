"""``bench/RESULTS.md``: one section per bench script, each rewritten by its own script's run
and the others kept as they are.

    write_section(Path("bench/RESULTS.md"), "bench_peers", body)

A section lies between ``<!-- NAME:start -->`` and ``<!-- NAME:end -->``; a new one goes at the
end. ``about_this_run`` gives the lines every section starts with: machine, date, command;
``section`` puts a heading, those lines, the run's settings and its figures together.
``spread``, ``against`` and ``figure_line`` word a figure over repeated runs, a goal's verdict
and a figure with its goal the same way in every script; ``Report`` prints such lines as they
come and keeps them for the section; ``chosen_size`` reads ``BENCH_SIZE``; ``plots_beside`` and
``plot_links`` place a run's plots and link them from its results file.
"""

from __future__ import annotations

import os
import platform
import shlex
import statistics
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

HEADER = """# Benchmark results

Written by the bench scripts (`make bench`; `BENCH_SIZE=full make bench` for the full sizes).
Each script rewrites its own section from one run: its figures, the ratios against their
baselines from the same run, and each goal with whether it is met (`bench_peers`: each size
from one run, a size measured again on its own keeping the others).
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
    """Replace (or add) the section ``name`` of the results file at ``path`` (a new file, and
    its directory, when there is none: ``--results`` anywhere)."""
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    text = path.read_text() if path.exists() else HEADER
    section = f"{start}\n{body.strip()}\n{end}\n"
    if start in text and end in text:
        before, rest = text.split(start, 1)
        after = rest.split(end, 1)[1].lstrip("\n")
        text = before + section + ("\n" + after if after else "")
    else:
        text = text.rstrip("\n") + "\n\n" + section
    path.parent.mkdir(parents=True, exist_ok=True)
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


def against(
    value: float, goal: float, *, at_most: bool = True, unit: str = "", digits: int = 2
) -> str:
    """A goal and whether ``value`` meets it, as every script prints and writes it.

    >>> against(1.07, 1.05)
    'goal <= 1.05: NOT met'
    >>> against(130.0, 50.0, at_most=False, digits=0, unit="x")
    'goal >= 50x: met'
    """
    sign = "<=" if at_most else ">="
    return f"goal {sign} {goal:.{digits}f}{unit}: {verdict(value, goal, at_most=at_most)}"


def figure_line(
    name: str,
    value: float,
    goal: float | None,
    *,
    at_most: bool = True,
    unit: str = "",
    digits: int = 2,
    places: int = 3,
    why: str = "",
) -> str:
    """A figure (``places`` decimals) with its goal (``digits`` decimals) and whether it is
    met (``goal`` None: no goal is set); ``why`` says how the figure was made or where its goal
    comes from.

    >>> figure_line("on / off", 1.0312, 1.05, why="of the medians")
    'on / off: 1.031 (of the medians; goal <= 1.05: met)'
    >>> figure_line("fed", 2500.0, None, unit=" rows/s", places=0)
    'fed: 2500 rows/s (no goal set)'
    """
    if goal is None:
        said = "no goal set"
    else:
        said = against(value, goal, at_most=at_most, unit=unit, digits=digits)
    return f"{name}: {value:.{places}f}{unit} ({f'{why}; ' if why else ''}{said})"


@dataclass
class Report:
    """The lines of a run's figures, each printed as it is added and kept for the section."""

    lines: list[str] = field(default_factory=list)

    def detail(self, line: str) -> None:
        """A figure that a goal's figure is made of (printed indented)."""
        print(f"  {line}", flush=True)
        self.lines.append(line)

    def figure(self, line: str) -> None:
        """A figure with its goal (a ``figure_line``)."""
        print(line, flush=True)
        self.lines.append(line)


def chosen_size(sizes: Mapping[str, T], default: str = "fast") -> tuple[str, T]:
    """The size ``BENCH_SIZE`` names (``default`` when unset) and its name; an unknown name
    ends the script with the names it could have been."""
    name = os.environ.get("BENCH_SIZE", "") or default
    if name not in sizes:
        sys.exit(f"BENCH_SIZE must be one of {', '.join(sizes)}, not {name!r}")
    return name, sizes[name]


def section(heading: str, settings: Sequence[str], figures: Sequence[str]) -> str:
    """A results section: its heading, this run's machine, date and command, the settings of
    the run and its figures, each a list item."""
    return "\n".join(
        [
            f"## {heading}",
            "",
            *about_this_run(),
            *(f"- {line}" for line in settings),
            "",
            *(f"- {line}" for line in figures),
        ]
    )


def plots_beside(results: Path, plots: Path | None) -> Path:
    """Where a run's plots go: ``plots`` when given, else ``plots/`` beside its results file
    (``bench/plots`` for ``bench/RESULTS.md``)."""
    return plots if plots is not None else results.parent / "plots"


def plot_links(results: Path, plots: Sequence[Path]) -> list[str]:
    """Markdown images of ``plots`` for the results file ``results``, each linked by its path
    from that file's directory (wherever either was written)."""
    base = results.resolve().parent
    return [f"![{p.stem}]({os.path.relpath(p.resolve(), base)})" for p in plots]


def save_plot(fig: Any, path: Path) -> Path:
    """Write a matplotlib figure of a bench as the PNG ``path`` (its legend small unless the
    plot placed its own, its layout tight) and free it."""
    import matplotlib.pyplot as plt

    for ax in fig.axes:
        if ax.get_legend() is None and ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
