"""What the scaling bench measured, as printed lines, a Markdown section and plots.

A point is one setting of one axis (rows per epoch, stages, closed epochs) with the per-epoch
seconds of each of its measured epochs. A growth is the ratio that says how cost grows between
two points of an axis, with its goal:

* rows: seconds per row at the largest size over seconds per row at the size before it
  (linear: 1; fixed costs make it smaller; <= 1.2 is the goal);
* stages: seconds per stage at the most stages over seconds per stage at the fewest (linear or
  better: <= 1.2);
* closed epochs: seconds per epoch behind the most closed epochs over behind the fewest (flat:
  <= 1.2).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from results_file import against, save_plot, spread

GOAL = 1.2
"""The goal of every growth ratio."""


@dataclass(frozen=True)
class Point:
    axis: str
    """``rows``, ``chain``, ``fan-out`` or ``closed``."""
    tool: str
    """``epochgate`` or ``plain PySpark`` (the rows axis runs both)."""
    x: int
    """Rows per epoch, stages, or closed epochs."""
    seconds: tuple[float, ...]
    """Per measured epoch."""

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    def line(self) -> str:
        what = {
            "rows": f"{self.x:,} rows/epoch",
            "chain": f"a chain of {self.x} stages",
            "fan-out": f"{self.x} stages side by side",
            "closed": f"behind {self.x:,} closed epochs",
        }[self.axis]
        return f"{self.tool}, {what}: per epoch {spread(self.seconds)}"


@dataclass(frozen=True)
class Growth:
    axis: str
    tool: str
    low: Point
    high: Point

    @property
    def value(self) -> float:
        if self.axis == "closed":
            return self.high.median / self.low.median
        return (self.high.median / self.high.x) / (self.low.median / self.low.x)

    def line(self) -> str:
        per = {"rows": "per row", "chain": "per stage", "fan-out": "per stage", "closed": ""}
        unit = {"rows": "rows/epoch", "chain": "stages", "fan-out": "stages"}
        name = {
            "rows": "linear in rows",
            "chain": "linear or better in stages (a chain)",
            "fan-out": "linear or better in stages (side by side)",
            "closed": "flat in closed epochs",
        }[self.axis]
        if self.axis == "closed":
            what = f"per-epoch time behind {self.high.x:,} / behind {self.low.x:,} closed epochs"
        else:
            what = f"time {per[self.axis]} at {self.high.x:,} / at {self.low.x:,} {unit[self.axis]}"
        goal = against(self.value, GOAL, digits=1)
        return f"{name}, {self.tool}: {what} {self.value:.2f} ({goal})"


def growths(points: Sequence[Point]) -> list[Growth]:
    """Per axis and tool: the two largest sizes for rows, the ends for stages and epochs."""
    found = []
    for axis in ("rows", "chain", "fan-out", "closed"):
        for tool in ("epochgate", "plain PySpark"):
            mine = sorted((p for p in points if (p.axis, p.tool) == (axis, tool)), key=_x)
            if len(mine) < 2:
                continue
            low = mine[-2] if axis == "rows" else mine[0]
            found.append(Growth(axis, tool, low, mine[-1]))
    return found


def _x(p: Point) -> int:
    return p.x


def section(points: Sequence[Point], about: Sequence[str], plots: Sequence[str]) -> str:
    """The ``bench_scaling`` section: ``about`` the run, its points, their growth and the
    ``plots`` (Markdown images, ``results_file.plot_links``)."""
    lines = [
        "## bench_scaling: how per-epoch cost grows with rows, stages and closed epochs",
        "",
        *about,
        "- figures: per-epoch seconds of the measured epochs (median and spread), after one "
        "warm-up epoch per setting; rows: `bank` without `rings` (validations not "
        "materialized, `balances` full), epochgate and the plain PySpark script in turn; "
        "stages: generated chains and fan-outs of transforms; closed epochs: a pipeline of two "
        "sources, a transform, a join, an aggregation and a sink, its closed epochs beyond the "
        "first real ones copied in the ledger from a real epoch",
        "",
        *(f"- {p.line()}" for p in points),
        "",
        "Growth, each against the smaller setting measured in the same run:",
        "",
        *(f"- {g.line()}" for g in growths(points)),
    ]
    if plots:
        lines += ["", *plots]
    return "\n".join(lines)


def plot(points: Sequence[Point], directory: Path) -> list[Path]:
    """One PNG per axis group (none without matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib import ticker
    except ImportError:
        return []
    directory.mkdir(parents=True, exist_ok=True)
    made = []
    for name, axes, xlabel in (
        ("scaling_rows.png", ("rows",), "rows per epoch"),
        ("scaling_stages.png", ("chain", "fan-out"), "stages"),
        ("scaling_closed.png", ("closed",), "closed epochs behind the epoch"),
    ):
        series = [
            (axis, tool, sorted((p for p in points if (p.axis, p.tool) == (axis, tool)), key=_x))
            for axis in axes
            for tool in ("epochgate", "plain PySpark")
        ]
        series = [s for s in series if s[2]]
        if not series:
            continue
        fig, ax = plt.subplots(figsize=(6, 4))
        for axis, tool, mine in series:
            label = tool if len(axes) == 1 else f"{axis} ({tool})"
            ax.plot([p.x for p in mine], [p.median for p in mine], marker="o", label=label)
        ax.set_xscale("log")
        if axes != ("closed",):
            ax.set_yscale("log")
        xs = sorted({p.x for _, _, mine in series for p in mine})
        ax.set_xticks(xs, [f"{x:,}" for x in xs])
        ax.xaxis.set_minor_formatter(ticker.NullFormatter())
        seconds = ticker.FuncFormatter(lambda v, _: f"{v:g}")
        ax.yaxis.set_major_formatter(seconds)
        ax.yaxis.set_minor_formatter(seconds)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("seconds per epoch (median)")
        ax.grid(True, which="both", alpha=0.3)
        made.append(save_plot(fig, directory / name))
    return made
