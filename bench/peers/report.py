"""The peers' figures: medians over repeats, ratios against the fastest, the goals, the table
printed, the section of ``bench/RESULTS.md`` and the plots."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path

from results_file import save_plot

from peers.record import Run

TOOLS = (
    "epochgate",
    "epochgate-sail",
    "plain",
    "plain-sail",
    "bytewax",
    "pathway",
    "bytewax-watermark",
    "pathway-watermark",
)
OURS = ("epochgate", "epochgate-sail")
PLAIN = ("plain", "plain-sail")
"""The plain PySpark script, on local Spark and on Sail: what the engine alone takes."""
SPARK_TOOLS = OURS + PLAIN
ON_SAIL = ("epochgate-sail", "plain-sail")
"""The Spark tools whose session is a Sail server's (started for the tool's process)."""
EXACT_PEERS = ("bytewax", "pathway")
"""Each peer at its best exact form."""
NAIVE = ("bytewax-watermark", "pathway-watermark")
"""Each peer closing epochs by watermark, as its windowing documentation writes it."""
STREAMING = EXACT_PEERS + NAIVE
NAMES = {
    "epochgate": "epochgate, Spark",
    "epochgate-sail": "epochgate, Sail",
    "plain": "plain PySpark, Spark",
    "plain-sail": "plain PySpark, Sail",
    "bytewax": "bytewax 0.21",
    "pathway": "Pathway 0.33",
    "bytewax-watermark": "bytewax watermark",
    "pathway-watermark": "Pathway watermark",
}
SAIL_SPEEDUP = 2.0
"""Goal: epochgate on Sail at least this many times every exact peer's throughput."""
PLAIN_OVERHEAD = 1.1
"""Goal: epochgate on local Spark within this many times the plain script's time."""
SAIL_PEAK_MB = 1_000.0
"""Goal: epochgate on Sail's peak memory (client and server) below this at 1,000,000 rows."""
PEAK_ROWS = 1_000_000
"""The size from which the memory goal applies."""


@dataclass(frozen=True)
class Figure:
    """One tool on one workload at one size: medians over its repeats, and the worst
    correctness seen."""

    rows: int
    """Rows per epoch."""
    workload: str
    tool: str
    throughput: float
    latency: float | None
    """Median seconds from an epoch's completion to its committed output (None: every epoch
    was emitted early)."""
    peak_mb: float
    wrong: int
    """Epochs whose final output differs from the oracle (worst repeat)."""
    early: int
    """Epochs emitted before they were complete (worst repeat)."""
    repeats: int
    spread: float
    """(max - min) / median of the throughput over the repeats."""
    phases: dict[str, float]
    """Where the first repeat's seconds went, for a tool that says (epochgate)."""
    latency_epochs: int | None = None
    """How many epochs ``latency`` is over (the median over the repeats): those not emitted
    early."""
    latency_spread: float | None = None
    """(max - min) / median of ``latency`` over the repeats (None: not kept by the run that
    measured it, or no latency)."""
    peak_spread: float | None = None
    """(max - min) / median of the peak memory over the repeats (None: not kept)."""

    @property
    def exact(self) -> bool:
        return self.wrong == 0 and self.early == 0

    def correctness(self) -> str:
        if self.exact:
            return "exact"
        parts = [f"{self.wrong} wrong"] if self.wrong else []
        parts += [f"{self.early} early"] if self.early else []
        return ", ".join(parts)


def spread(values: list[float]) -> float:
    """(max - min) / median: how far apart the repeats of one figure were."""
    middle = statistics.median(values)
    return (max(values) - min(values)) / middle if middle else 0.0


def figure(rows: int, runs: list[Run], wrong: list[int]) -> Figure:
    """``runs`` of one tool, workload and size, with the wrong epochs each had."""
    rates = [r.throughput for r in runs]
    medians = [statistics.median(r.latencies()) for r in runs if r.latencies()]
    peaks = [r.peak_rss / 1e6 for r in runs]
    return Figure(
        rows=rows,
        workload=runs[0].workload,
        tool=runs[0].tool,
        throughput=statistics.median(rates),
        latency=statistics.median(medians) if medians else None,
        peak_mb=statistics.median(peaks),
        wrong=max(wrong),
        early=max(len(r.premature) for r in runs),
        repeats=len(runs),
        spread=spread(rates),
        phases=runs[0].phases,
        latency_epochs=round(statistics.median(len(r.latencies()) for r in runs)),
        latency_spread=spread(medians) if medians else None,
        peak_spread=spread(peaks),
    )


def slower(f: Figure, group: list[Figure]) -> float:
    """How many times the fastest tool's throughput of the group ``f``'s is."""
    best = max(g.throughput for g in group)
    return best / f.throughput if f.throughput else float("inf")


@dataclass(frozen=True)
class Goal:
    what: str
    met: bool
    detail: str


def goals(group: list[Figure]) -> list[Goal]:
    """The goals of one workload at one size (``group``: every tool's figure there), each a
    ratio from this run's figures."""
    by = {f.tool: f for f in group}
    some = next(iter(group), None)
    if some is None:
        return []
    where = f"{some.workload}, {some.rows:,} rows/epoch"
    found = [
        Goal(f"{where}: {NAMES[t]} exact, no epoch emitted early", by[t].exact, by[t].correctness())
        for t in OURS
        if t in by
    ]
    sail = by.get("epochgate-sail")
    peers = [by[t] for t in STREAMING if t in by and by[t].exact]
    if sail is not None and peers:
        ratios = [(p, slower(p, [sail])) for p in peers]  # sail / peer
        detail = ", ".join(f"{r:.2f}x {NAMES[p.tool]}" for p, r in ratios)
        found.append(
            Goal(
                f"{where}: epochgate on Sail at least {SAIL_SPEEDUP:g}x the throughput of every "
                "exact peer",
                sail.exact and all(r >= SAIL_SPEEDUP for _, r in ratios),
                detail,
            )
        )
    spark, plain = by.get("epochgate"), by.get("plain")
    if spark is not None and plain is not None and spark.throughput:
        ratio = plain.throughput / spark.throughput  # epochgate's time over the plain script's
        found.append(
            Goal(
                f"{where}: epochgate on local Spark within {PLAIN_OVERHEAD:g}x the plain "
                "PySpark script's time",
                ratio <= PLAIN_OVERHEAD,
                f"{ratio:.2f}x",
            )
        )
    if sail is not None and sail.rows >= PEAK_ROWS:
        found.append(
            Goal(
                f"{where}: epochgate on Sail below {SAIL_PEAK_MB:,.0f} MB peak (client and server)",
                sail.peak_mb < SAIL_PEAK_MB,
                f"{sail.peak_mb:,.0f} MB",
            )
        )
    return found


def table(figures: list[Figure]) -> list[list[str]]:
    """Rows of the table: a header, then one row per figure."""
    out = [
        [
            "rows/epoch",
            "workload",
            "tool",
            "rows/s",
            "x fastest",
            "close->output (median)",
            "peak memory",
            "correctness",
        ]
    ]
    for f in figures:
        group = [g for g in figures if (g.rows, g.workload) == (f.rows, f.workload)]
        latency = "n/a (all early)"
        if f.latency is not None:
            latency = f"{f.latency:.2f} s{_plus_minus(f, f.latency_spread)}"
        if f.early and f.latency is not None and f.latency_epochs is not None:
            latency += f" (over {f.latency_epochs} epoch{'s' if f.latency_epochs != 1 else ''})"
        out.append(
            [
                f"{f.rows:,}",
                f.workload,
                NAMES[f.tool],
                f"{f.throughput:,.0f}{_plus_minus(f, f.spread)}",
                f"{slower(f, group):.2f}",
                latency,
                f"{f.peak_mb:,.0f} MB{_plus_minus(f, f.peak_spread)}",
                f.correctness(),
            ]
        )
    return out


def _plus_minus(f: Figure, spread: float | None) -> str:
    """`` ±x%``, half the spread of a figure over its repeats (nothing with one repeat, or a
    spread its run did not keep)."""
    return f" ±{spread / 2:.0%}" if f.repeats > 1 and spread is not None else ""


def text_table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows)


def markdown_table(rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
    lines += ["| " + " | ".join(r) + " |" for r in rows[1:]]
    return "\n".join(lines)


def goal_lines(all_goals: list[Goal]) -> list[str]:
    return [f"{'met' if g.met else 'NOT met'}: {g.what} ({g.detail})" for g in all_goals]


def faster_peers(figures: list[Figure]) -> list[str]:
    """Where a peer beats epochgate (on either engine; the plain script on its own engine),
    said plainly: higher throughput, a shorter time from an epoch's close to its output, a
    lower peak memory."""
    lines = []
    for f in figures:
        if f.tool in OURS:
            continue
        where = f"on {f.workload} at {f.rows:,} rows/epoch ({f.correctness()})"
        for ours in (
            g
            for g in figures
            if (g.rows, g.workload) == (f.rows, f.workload)
            and g.tool in OURS
            and (f.tool not in PLAIN or (f.tool in ON_SAIL) == (g.tool in ON_SAIL))
        ):
            if f.throughput > ours.throughput:
                lines.append(
                    f"{NAMES[f.tool]} is {f.throughput / ours.throughput:.2f}x the throughput "
                    f"of {NAMES[ours.tool]} {where}"
                )
            if f.latency is not None and ours.latency is not None and f.latency < ours.latency:
                lines.append(
                    f"{NAMES[f.tool]}'s close->output is {f.latency:.2f} s against "
                    f"{NAMES[ours.tool]}'s {ours.latency:.2f} s {where}"
                )
            if f.peak_mb < ours.peak_mb:
                engine = "Spark's JVM" if ours.tool == "epochgate" else "the Sail server"
                lines.append(
                    f"{NAMES[f.tool]}'s peak memory is {f.peak_mb:,.0f} MB against "
                    f"{NAMES[ours.tool]}'s {ours.peak_mb:,.0f} MB {where} (with {engine})"
                )
    return lines


def phase_lines(figures: list[Figure]) -> list[str]:
    """Where epochgate's seconds went, per workload and size (its first repeat)."""
    lines = []
    for f in figures:
        if f.phases:
            parts = ", ".join(f"{k} {v:.1f}s" for k, v in f.phases.items())
            lines.append(
                f"{NAMES[f.tool]}, {f.workload}, {f.rows:,} rows/epoch, first repeat: {parts}"
            )
    return lines


def plots(figures: list[Figure], directory: Path) -> list[Path]:
    """Bar charts of throughput and latency per workload and size (none without
    matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    directory.mkdir(parents=True, exist_ok=True)
    groups = sorted({(f.workload, f.rows) for f in figures})
    made = []
    for name, label, value in (
        ("peers_throughput.png", "rows/s (log)", lambda f: f.throughput),
        ("peers_latency.png", "epoch close -> committed output, s", lambda f: f.latency or 0.0),
    ):
        fig, ax = plt.subplots(figsize=(10, 4))
        width = 0.8 / len(TOOLS)
        for i, tool in enumerate(TOOLS):
            xs, ys = [], []
            for j, group in enumerate(groups):
                f = next(
                    (f for f in figures if (f.workload, f.rows, f.tool) == (*group, tool)), None
                )
                if f is not None:
                    xs.append(j + i * width)
                    ys.append(value(f))
            ax.bar(xs, ys, width, label=NAMES[tool])
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(groups))])
        ax.set_xticklabels([f"{w}\n{r:,} rows/epoch" for w, r in groups])
        ax.set_ylabel(label)
        if name == "peers_throughput.png":
            ax.set_yscale("log")
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))  # off the bars
        made.append(save_plot(fig, directory / name))
    return made
