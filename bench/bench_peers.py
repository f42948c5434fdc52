"""epochgate beside the tools users would otherwise pick, on the same inputs.

    .venv/bin/python bench/bench_peers.py          # BENCH_SIZE=fast unless set
    BENCH_SIZE=full .venv/bin/python bench/bench_peers.py
    BENCH_SIZE=full .venv/bin/python bench/bench_peers.py --rows 100000 --repeats 1
    BENCH_SIZE=full .venv/bin/python bench/bench_peers.py --rows 100000 --workloads join \
        --tools epochgate plain --results /tmp/peers.md --plots /tmp/plots
    BENCH_SIZE=full .venv/bin/python bench/bench_peers.py --rows 1000000 --repeats 3

Two workloads on seeded Parquet files, one per source, worker and epoch (``peers/workloads.py``):
a running sum per account over the epochs (100,000 accounts), and a join of two inputs whose
epoch may be emitted only once both inputs are complete, one of them with a worker that
delivers each epoch late (after the other input has moved on). The tools, each in its own
process, fed the files in the same order: epochgate (a ``Pipeline`` and a ``Runtime``) on local
Spark and on Sail (``spark_session("sail")``: a Sail server started for the process), a plain
PySpark script on the same two engines (each epoch once all of its files are there, in one
Spark job, one session: what the engine alone takes, with nothing durable but its output
files; for the running sum, each epoch's table of every account's total), and
bytewax 0.21 and Pathway 0.33 each in its fastest exact form (a completeness gate on per-file end
markers: ``peers/bytewax_tool.py``, ``peers/pathway_tool.py``) and in its naive form, closing
epochs by watermark as their windowing documentation does (``peers/*_watermark.py``).

Every output is checked against a DuckDB SQL oracle over the raw files, and so is when each
epoch was emitted: before the epoch was complete is "early", a final value that differs from the
oracle's is "wrong". Printed per tool: throughput (input rows/s), seconds from an epoch's
completion to its committed output (median), peak memory of the tool's whole process tree (the
JVM, the Sail server), correctness; medians over the repeats (each repeat runs every tool in
turn, so a drift in the machine's speed falls on all of them), the ratio against the fastest,
and the goals, each a ratio from this run's figures. The same goes to the ``bench_peers``
section of ``bench/RESULTS.md``, with plots in ``bench/plots/``. A run of some sizes keeps the
figures of the other sizes from earlier runs of the same ``BENCH_SIZE`` (``peers/kept.py``):
each size's figures come from one run, said with its date and command.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from peers.kept import Measured, merge, path_beside
from peers.record import Recorder, Run
from peers.report import (
    NAIVE,
    NAMES,
    ON_SAIL,
    PEAK_ROWS,
    PLAIN,
    PLAIN_OVERHEAD,
    SAIL_PEAK_MB,
    SAIL_SPEEDUP,
    SPARK_TOOLS,
    TOOLS,
    Figure,
    Goal,
    faster_peers,
    figure,
    goal_lines,
    goals,
    markdown_table,
    phase_lines,
    plots,
    table,
    text_table,
)
from peers.workloads import WORKLOADS, Feed, Size, generate, wrong_epochs
from results_file import about_this_run, chosen_size, plot_links, plots_beside, write_section
from scratch import scratch

if TYPE_CHECKING:  # Spark is imported by the processes that run it
    from pyspark.sql import SparkSession

BENCH = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Plan:
    sizes: tuple[Size, ...]
    repeats: int | tuple[int, ...]
    """Runs of each tool per size: one number for every size, or one per size in order (the
    last one for any size after)."""

    def repeats_at(self, index: int) -> int:
        """How many times each tool runs at ``sizes[index]``."""
        if isinstance(self.repeats, int):
            return self.repeats
        return self.repeats[min(index, len(self.repeats) - 1)]


PLANS = {
    "fast": Plan((Size(rows=2_000, epochs=5, accounts=200, customers=50),), repeats=1),
    "full": Plan((Size(rows=100_000, epochs=20), Size(rows=1_000_000, epochs=10)), repeats=3),
}
WIDTH = max(len(name) for name in NAMES.values())
"""The column of the tools' names in the lines printed as each run ends."""
PATHWAY_TOOLS = ("pathway", "pathway-watermark")
PATHWAY_THREADS_ENV = "PATHWAY_THREADS"
"""Pathway's engine threads, read when it starts (``peers/pathway_tool.py``)."""
SAIL = "sail"
"""The engine setting of the Sail runs (epochgate's and the plain script's): a Sail server
started for the process, a child of it, so its memory counts in the tool's tree (each tool's
process has a state directory of its own, where no server started apart is found)."""


def run_tool(tool: str, feed: Feed, home: Path, spark: SparkSession | None = None) -> Run:
    """One tool's run of the feed, in this process (``spark``: the session of a Spark tool, on
    its engine; one is started, outside the timing, when not given)."""
    rec = Recorder(feed)
    home.mkdir(parents=True, exist_ok=True)
    if tool in SPARK_TOOLS:
        from peers.spark_tools import run_epochgate, run_plain

        if spark is None:
            from pipelines.spark.session import quiet, spark_session

            spark = spark_session(SAIL if tool in ON_SAIL else None)
            quiet(spark)
        out = (run_plain if tool in PLAIN else run_epochgate)(feed, spark, home, rec)
    elif tool == "bytewax":
        from peers.bytewax_tool import run_bytewax

        out = run_bytewax(feed, home, rec)
    elif tool == "bytewax-watermark":
        from peers.bytewax_watermark import run_bytewax_watermark

        out = run_bytewax_watermark(feed, home, rec)
    elif tool == "pathway":
        from peers.pathway_tool import run_pathway

        out = run_pathway(feed, home, rec)
    elif tool == "pathway-watermark":
        from peers.pathway_watermark import run_pathway_watermark

        out = run_pathway_watermark(feed, home, rec)
    else:
        raise ValueError(f"unknown tool {tool!r}: one of {', '.join(TOOLS)}")
    return rec.finish(tool, out)


def in_subprocess(tool: str, feed: Feed, home: Path) -> Run:
    """``run_tool`` in a process of its own, so its peak memory is its own."""
    home.mkdir(parents=True, exist_ok=True)
    feed.dump(home / "feed.json")
    done = home / "run.json"
    command = [sys.executable, str(Path(__file__).resolve()), "--one", tool, "--home", str(home)]
    log = home / "log.txt"
    # A home of its own: a Sail server ``epochgate sail start`` left running is not found, so
    # a Sail tool starts its own, a child whose memory counts in the tool's tree.
    env = {**os.environ, "EPOCHGATE_HOME": str(home / "epochgate-home")}
    if tool in PATHWAY_TOOLS:  # its engine on every core (one thread unless told)
        env.setdefault(PATHWAY_THREADS_ENV, str(os.cpu_count() or 1))
    with log.open("w") as out:
        code = subprocess.call(command, stdout=out, stderr=subprocess.STDOUT, env=env)
    if code != 0 or not done.exists():
        tail = "\n".join(log.read_text().splitlines()[-30:])
        raise RuntimeError(f"{tool} on {feed.workload} failed (exit {code}):\n{tail}")
    return Run.load(done)


Runner = Callable[[str, Feed, Path], Run]


def epochs(which: list[int]) -> str:
    """``which`` in a few words: none, or how many and the first ones."""
    if not which:
        return "none"
    first = ", ".join(map(str, which[:5]))
    return f"{len(which)} ({first}{', ...' if len(which) > 5 else ''})"


def measure(
    plan: Plan,
    tools: Sequence[str],
    root: Path,
    runner: Runner = in_subprocess,
    workloads: Sequence[str] = WORKLOADS,
) -> list[Figure]:
    """Every tool on every workload and size, ``plan.repeats`` times; their figures. The
    watermark forms run the join only: they exist to show the late worker's epochs emitted
    early and wrong, and the running sum has no late worker (there they are exact, and slow:
    bytewax's ``fold_window`` over 100,000 accounts took 252 s for 20 epochs of 100,000 rows,
    an epoch's output 120 s after its last file)."""
    figures: list[Figure] = []
    for index, size in enumerate(plan.sizes):
        for workload in workloads:
            inputs = root / f"rows{size.rows}"
            started = time.perf_counter()
            feed = generate(inputs, workload, size)
            took = time.perf_counter() - started
            print(
                f"{workload}: {size.epochs} epochs x {size.rows:,} rows generated in {took:.1f}s",
                flush=True,
            )
            taking = [t for t in tools if workload == "join" or t not in NAIVE]
            runs: dict[str, list[Run]] = {tool: [] for tool in taking}
            wrong: dict[str, list[int]] = {tool: [] for tool in taking}
            # Each repeat runs every tool in turn: a drift in the machine's speed over the
            # minutes of a size falls on every tool alike, not on the tools run last.
            for repeat in range(plan.repeats_at(index)):
                for tool in taking:
                    home = root / "runs" / f"{tool}-{workload}-{size.rows}-{repeat}"
                    run = runner(tool, feed, home)
                    bad = wrong_epochs(inputs, workload, Path(run.output))
                    runs[tool].append(run)
                    wrong[tool].append(len(bad))
                    latencies = run.latencies()
                    latency = f"{sorted(latencies)[len(latencies) // 2]:.2f}s" if latencies else "-"
                    print(
                        f"  {NAMES[tool]:<{WIDTH}} run {repeat + 1}: {run.seconds:.1f}s, "
                        f"{run.throughput:,.0f} rows/s, close->output {latency}, "
                        f"{run.peak_rss / 1e6:,.0f} MB, wrong {epochs(bad)}, "
                        f"early {epochs(run.premature)}",
                        flush=True,
                    )
                    if run.phases:
                        parts = ", ".join(f"{k} {v:.1f}s" for k, v in run.phases.items())
                        print(f"    where {NAMES[tool]}'s seconds went: {parts}", flush=True)
            figures += [figure(size.rows, runs[tool], wrong[tool]) for tool in taking]
    return figures


def report(
    figures: list[Figure], results: Path | None, plot_dir: Path | None, plan: str = "fast"
) -> list[Goal]:
    """Print the table and the goals; write the RESULTS.md section and the plots, with the
    figures of the sizes this run did not measure kept from earlier runs of ``plan``
    (``peers/kept.py``)."""
    about = about_this_run()
    sizes = [
        Measured(rows, tuple(about), tuple(f for f in figures if f.rows == rows))
        for rows in sorted({f.rows for f in figures})
    ]
    if results is not None:
        results.parent.mkdir(parents=True, exist_ok=True)
        sizes = merge(path_beside(results), plan, sizes)
        figures = [f for m in sizes for f in m.figures]
    rows = table(figures)
    found = [
        g
        for key in sorted({(f.rows, f.workload) for f in figures})
        for g in goals([f for f in figures if (f.rows, f.workload) == key])
    ]
    print()
    for m in sizes:
        print(f"measured: {m.said()}")
    print(text_table(rows))
    print()
    for line in goal_lines(found):
        print(f"goal {line}")
    wins = faster_peers(figures)
    for line in wins:
        print(f"a peer ahead: {line}")
    if not wins:
        print("no peer ahead of epochgate on throughput, latency or memory")
    made = plots(figures, plot_dir) if plot_dir is not None else []
    if results is not None:
        links = plot_links(results, made)
        body = section(figures, sizes, rows=rows, found=found, wins=wins, links=links)
        write_section(results, "bench_peers", body)
        print(f"written: {results}")
    return found


def section(
    figures: list[Figure],
    sizes: list[Measured],
    *,
    rows: list[list[str]],
    found: list[Goal],
    wins: list[str],
    links: list[str],
) -> str:
    machine = about_this_run()[0]
    measured = [
        f"- {m.said()}" + (f" ({m.about[0].removeprefix('- ')})" if m.about[0] != machine else "")
        for m in sizes
    ]
    lines = [
        "## bench_peers: epochgate, plain PySpark, bytewax and Pathway on the same inputs",
        "",
        machine,
        "- each size measured by one run, every tool side by side (a size measured again on "
        "its own keeps the other sizes' figures); figures are medians over the repeats, ± is "
        "half their spread ((max - min) / median over the repeats):",
        *[f"  {line}" for line in measured],
        "",
        "Workloads: `sum`, a running sum per account (100,000 accounts at full size); `join`, "
        "orders joined with payments per epoch, payments' worker 1 one epoch late. Tools: "
        "epochgate on local Spark and on Sail; the plain PySpark script on local Spark and "
        "on Sail (each epoch in one Spark job and nothing else: no ledger, no check of a "
        "delivered file, nothing durable but its output files, for the running sum each "
        "epoch's table of every account's total, the accounts it moved its output); "
        "bytewax and Pathway at their fastest exact form (a completeness gate on per-file end "
        "markers), and each closing epochs by watermark (the naive rows, on the join only: "
        "the running sum has no late worker). rows/s: input rows "
        "over the seconds from the first file handed to the tool to the last output; "
        "close->output: from the handing over of an epoch's last file to its committed output "
        "(epochgate's: published by its sink), over the epochs not emitted early; peak memory: "
        "the sum of the high-water marks of the tool's processes (Python, Spark's JVM, the "
        "Sail server) when its run ended, before the bench gathers its output into one file; "
        "correctness: epochs whose final output "
        "differs from the DuckDB oracle (wrong) and epochs emitted before they were complete "
        "(early).",
        "",
        markdown_table(rows),
        "",
        f"Goals, each a ratio of this run's figures: epochgate on Sail at least "
        f"{SAIL_SPEEDUP:g}x the throughput of every exact peer (bytewax, Pathway), on both "
        f"workloads at every size; epochgate on local Spark within {PLAIN_OVERHEAD:g}x the "
        f"plain PySpark script's time on both workloads; epochgate on Sail below "
        f"{SAIL_PEAK_MB:,.0f} MB peak from {PEAK_ROWS:,} rows/epoch; on both engines no epoch "
        "of epochgate's emitted early or wrong.",
        "",
        *[f"- {line}" for line in goal_lines(found)],
    ]
    if wins:
        lines += ["", "Where a peer beats epochgate:", "", *[f"- {w}" for w in wins]]
    else:
        lines += ["", "No peer beats epochgate on throughput, latency or memory here."]
    spent = phase_lines(figures)
    if spent:
        lines += [
            "",
            "Where epochgate's seconds went (sending and advancing the workers; `run()`, and "
            "within it each stage's runs):",
            "",
            *[f"- {line}" for line in spent],
        ]
    if links:
        lines += ["", *links]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="*", help="rows per epoch (one run per size)")
    parser.add_argument("--epochs", type=int, help="epochs per workload")
    parser.add_argument(
        "--repeats",
        type=int,
        nargs="+",
        help="runs of each tool (medians over them); one number per size in turn, the last for "
        "the sizes after it",
    )
    parser.add_argument("--tools", nargs="*", default=list(TOOLS), choices=TOOLS)
    parser.add_argument("--workloads", nargs="*", default=list(WORKLOADS), choices=WORKLOADS)
    parser.add_argument("--results", type=Path, default=BENCH / "RESULTS.md")
    parser.add_argument(
        "--plots", type=Path, help="where the plots go (default: plots/ beside --results)"
    )
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="measure nothing: write the section and the plots again from the kept figures",
    )
    parser.add_argument("--one", choices=TOOLS, help=argparse.SUPPRESS)
    parser.add_argument("--home", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:  # a child process: one tool, one feed
        run_tool(args.one, Feed.load(args.home / "feed.json"), args.home).dump(
            args.home / "run.json"
        )
        return
    name, plan = chosen_size(PLANS)
    if args.report_only:
        report([], args.results, plots_beside(args.results, args.plots), plan=name)
        return
    sizes = plan.sizes
    if args.rows:
        sizes = tuple(Size(rows=r, epochs=sizes[0].epochs) for r in args.rows)
    if args.epochs:
        sizes = tuple(Size(s.rows, args.epochs, s.accounts, s.customers) for s in sizes)
    plan = Plan(sizes, tuple(args.repeats) if args.repeats else plan.repeats)
    each = ", ".join(
        f"{s.rows:,} rows x {s.epochs} epochs x {plan.repeats_at(i)} repeat(s)"
        for i, s in enumerate(sizes)
    )
    print(f"peers ({name}): {each}, tools {', '.join(args.tools)}", flush=True)
    with scratch("bench-peers-") as tmp:
        figures = measure(plan, args.tools, Path(tmp), workloads=args.workloads)
    report(figures, args.results, plots_beside(args.results, args.plots), plan=name)


if __name__ == "__main__":
    main()
