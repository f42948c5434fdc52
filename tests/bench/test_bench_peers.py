"""The peers bench at a tiny size: every tool runs both workloads in this process and is
checked against the oracle; the figures themselves are for ``BENCH_SIZE=full``, never asserted
in a test. What is asserted is what the bench exists to show: epochgate and the plain script, on
local Spark and on Sail (in a process of its own, with its Sail server), and each peer's exact
form emit no epoch before it is complete, and the peers' watermark forms emit the late
worker's epochs early."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from tests.bench.scripts import load


@pytest.mark.spark
@pytest.mark.sail
@pytest.mark.slow(20)
def test_every_tool_runs_both_workloads_and_only_the_watermark_forms_emit_early(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bench = load("bench_peers")
    from peers.workloads import Size

    plan = bench.Plan((Size(rows=400, epochs=2, accounts=40, customers=10),), repeats=1)
    figures = bench.measure(
        plan,
        bench.TOOLS,
        tmp_path / "work",
        # A process holds a local session or a Connect one, not both: Sail's runs in their own.
        runner=lambda tool, feed, home: (
            bench.in_subprocess(tool, feed, home)
            if tool in bench.ON_SAIL
            else bench.run_tool(tool, feed, home, spark)
        ),
    )
    by = {(f.workload, f.tool): f for f in figures}
    exact = ("epochgate", "epochgate-sail", "plain", "plain-sail", "bytewax", "pathway")
    assert set(by) == {("sum", t) for t in exact} | {("join", t) for t in bench.TOOLS}
    for tool in exact:
        assert by["sum", tool].exact, by["sum", tool]
        assert by["join", tool].exact, by["join", tool]
    for naive in ("bytewax-watermark", "pathway-watermark"):  # closed by watermark
        assert by["join", naive].early > 0, by["join", naive]
        assert by["join", naive].wrong > 0, by["join", naive]
    assert by["join", "epochgate"].latency is not None
    assert by["join", "epochgate-sail"].latency is not None

    results = tmp_path / "RESULTS.md"
    results.write_text("# Benchmark results\n\n<!-- other:start -->\nkept\n<!-- other:end -->\n")
    found = bench.report(figures, results, tmp_path / "plots")
    out = capsys.readouterr().out
    for engine in ("Spark", "Sail"):
        assert f"goal met: join, 400 rows/epoch: epochgate, {engine} exact" in out
    for goal in ("on Sail at least 2x the throughput", "within 1.1x the plain PySpark script"):
        lines = [line for line in out.splitlines() if goal in line]
        assert len(lines) == 2, out  # one per workload, met or not
        assert all(line.startswith(("goal met: ", "goal NOT met: ")) for line in lines)
    assert "below 1,000 MB peak" not in out  # from 1,000,000 rows/epoch only
    assert all(g.met for g in found if "exact, no epoch emitted early" in g.what)
    text = results.read_text()
    assert "kept" in text
    assert "<!-- bench_peers:start -->" in text
    assert "| 400 | join | bytewax 0.21 |" in text
    assert "| 400 | join | epochgate, Sail |" in text
    assert "| 400 | join | plain PySpark, Sail |" in text
    assert "- machine: " in text
    assert (tmp_path / "plots" / "peers_throughput.png").stat().st_size > 0


@pytest.mark.ledger
def test_a_tool_runs_in_a_process_of_its_own_and_reports_its_peak_memory(tmp_path: Path) -> None:
    bench = load("bench_peers")
    from peers.workloads import Size, generate, wrong_epochs

    feed = generate(tmp_path / "in", "sum", Size(rows=200, epochs=2, accounts=20))
    run = bench.in_subprocess("bytewax", feed, tmp_path / "child")
    assert run.peak_rss > 10_000_000
    assert sorted(run.emitted_at) == [0, 1]
    assert wrong_epochs(tmp_path / "in", "sum", Path(run.output)) == []


@pytest.mark.unit
def test_peak_memory_counts_every_process_under_the_tool(tmp_path: Path) -> None:
    import subprocess
    import sys

    load("bench_peers")
    from peers.record import tree

    child = subprocess.Popen(
        [sys.executable, "-c", "import subprocess, sys; subprocess.run(['sleep', '30'])"]
    )
    try:
        for _ in range(200):  # until the grandchild (sleep) has started
            under = tree(child.pid)
            if len(under) == 2:
                break
            time.sleep(0.05)
        assert len(under) == 2, under
        assert set(under) <= set(tree(os.getpid()))  # the child and the child's child
    finally:
        child.kill()
        child.wait()


@pytest.mark.unit
def test_a_script_rewrites_its_own_section_and_keeps_the_others(tmp_path: Path) -> None:
    results_file = load("results_file")
    path = tmp_path / "RESULTS.md"
    results_file.write_section(path, "bench_a", "## a\nfirst")
    results_file.write_section(path, "bench_b", "## b\nonly")
    results_file.write_section(path, "bench_a", "## a\nsecond")
    text = path.read_text()
    assert text.startswith("# Benchmark results")
    assert "second" in text
    assert "first" not in text
    assert text.index("## a") < text.index("## b")
    assert text.count("<!-- bench_a:start -->") == 1


@pytest.mark.unit
def test_the_late_worker_closes_each_epoch_after_the_next_one_has_begun(tmp_path: Path) -> None:
    load("bench_peers")
    from peers.workloads import Size, generate

    feed = generate(tmp_path, "join", Size(rows=40, epochs=3, customers=4))
    order = [(s.source, s.worker, s.epoch) for s in feed.steps]
    assert order[:5] == [
        ("orders", 0, 0),
        ("payments", 0, 0),
        ("orders", 0, 1),
        ("payments", 0, 1),
        ("payments", 1, 0),
    ]
    assert feed.closes == {0: 5, 1: 8, 2: 9}  # steps delivered when each epoch is complete


def _figures(rows: int, throughput: float) -> list[Any]:
    from peers.report import TOOLS, Figure

    return [
        Figure(
            rows=rows,
            workload="sum",
            tool=tool,
            throughput=throughput / (i + 1),
            latency=0.5,
            peak_mb=100.0,
            wrong=0,
            early=0,
            repeats=3,
            spread=0.1,
            phases={},
        )
        for i, tool in enumerate(TOOLS)
    ]


@pytest.mark.unit
def test_a_size_measured_again_on_its_own_keeps_the_other_sizes_of_the_same_plan(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bench = load("bench_peers")
    results = tmp_path / "RESULTS.md"
    bench.report(_figures(100, 1000.0) + _figures(1000, 2000.0), results, None, plan="full")
    bench.report(_figures(1000, 3000.0), results, None, plan="full")  # 1,000 again, alone
    text = results.read_text()
    assert "| 100 | sum | epochgate, Spark | 1,000 ±5% |" in text  # kept from the first run
    assert "| 1,000 | sum | epochgate, Spark | 3,000 ±5% |" in text  # the second run's
    assert "| 1,000 | sum | epochgate, Spark | 2,000" not in text
    assert text.count("rows/epoch: 20") == 2  # each size with the date of its own run
    assert "3 repeats of each tool" in text
    bench.report(_figures(10, 50.0), results, None, plan="fast")  # another plan, apart
    text = results.read_text()
    assert "| 10 | sum | epochgate, Spark | 50 ±5% |" in text
    assert "| 100 | sum |" not in text
    assert "| 1,000 | sum |" not in text
    assert "measured: 10 rows/epoch: " in capsys.readouterr().out
    bench.report([], results, None, plan="full")  # the full plan's sizes, kept meanwhile
    text = results.read_text()
    assert "| 100 | sum | epochgate, Spark | 1,000 ±5% |" in text
    assert "| 1,000 | sum | epochgate, Spark | 3,000 ±5% |" in text
    assert "| 10 | sum |" not in text


@pytest.mark.unit
def test_every_figure_of_several_repeats_shows_its_spread(tmp_path: Path) -> None:
    load("bench_peers")  # puts bench/ on the path
    from peers.record import Run
    from peers.report import figure, table

    def run(seconds: float, latency: float, peak_mb: float) -> Run:
        return Run(
            tool="epochgate",
            workload="sum",
            rows=1000,
            seconds=seconds,
            closed_at={0: 0.0},
            emitted_at={0: latency},
            premature=[],
            late_rows=0,
            peak_rss=int(peak_mb * 1e6),
            output="",
        )

    f = figure(100, [run(1.0, 0.2, 900.0), run(1.25, 0.4, 1000.0), run(0.8, 0.3, 1100.0)], [0])
    assert f.throughput == 1000.0
    assert f.latency == pytest.approx(0.3)
    assert f.latency_spread == pytest.approx(0.2 / 0.3)
    assert f.peak_mb == pytest.approx(1000.0)
    assert f.peak_spread == pytest.approx(0.2)
    row = table([f])[1]
    assert row[3] == "1,000 ±22%"  # rows/s 800 to 1250: (1250 - 800) / 1000 / 2
    assert row[5] == "0.30 s ±33%"
    assert row[6] == "1,000 MB ±10%"
    one = figure(100, [run(1.0, 0.2, 900.0)], [0])
    assert table([one])[1][3:7] == ["1,000", "1.00", "0.20 s", "900 MB"]  # one repeat: none


@pytest.mark.unit
def test_each_repeat_runs_every_tool_in_turn(tmp_path: Path) -> None:
    """The tools take turns within each repeat (a drift in the machine's speed falls on all of
    them alike), and each tool's figure holds its own repeats."""
    bench = load("bench_peers")
    import duckdb
    from peers.record import Run
    from peers.workloads import COLUMNS, Feed, Size, oracle_sql

    order: list[tuple[str, str]] = []

    def runner(tool: str, feed: Feed, home: Path) -> Run:
        order.append((tool, home.name))
        out = home / "output.parquet"
        home.mkdir(parents=True)
        inputs = tmp_path / "work" / "rows40"
        cols = ", ".join(COLUMNS[feed.workload])
        query = f"SELECT {cols} FROM ({oracle_sql(inputs, feed.workload)})"
        duckdb.sql(f"COPY ({query}) TO '{out}' (FORMAT parquet)")
        return Run(tool, feed.workload, 40, 1.0, {}, {}, [], 0, 0, str(out))

    plan = bench.Plan((Size(rows=40, epochs=2, accounts=8, customers=4),), repeats=2)
    figures = bench.measure(plan, ["epochgate", "plain"], tmp_path / "work", runner, ["join"])
    assert order == [
        ("epochgate", "epochgate-join-40-0"),
        ("plain", "plain-join-40-0"),
        ("epochgate", "epochgate-join-40-1"),
        ("plain", "plain-join-40-1"),
    ]
    assert [(f.tool, f.repeats, f.exact) for f in figures] == [
        ("epochgate", 2, True),
        ("plain", 2, True),
    ]


@pytest.mark.unit
def test_the_plain_script_is_set_beside_epochgate_on_its_own_engine_only() -> None:
    """The plain script on Sail ahead of epochgate on Sail is said; beside epochgate on local
    Spark it says nothing about epochgate (another engine): the bytewax line still is."""
    load("bench_peers")  # puts bench/ on the path
    from peers.record import Run
    from peers.report import Figure, faster_peers, figure

    def at(tool: str, seconds: float) -> Figure:
        run = Run(tool, "join", 1000, seconds, {0: 0.0}, {0: seconds}, [], 0, 10**8, "")
        return figure(1000, [run], [0])

    figures = [at("epochgate", 4.0), at("epochgate-sail", 2.0), at("plain-sail", 0.5)]
    figures.append(at("bytewax", 1.0))
    lines = faster_peers(figures)
    assert "plain PySpark, Sail is 4.00x the throughput of epochgate, Sail" in lines[0]
    assert not any("plain PySpark, Sail" in line and "epochgate, Spark" in line for line in lines)
    assert any("bytewax 0.21 is 4.00x the throughput of epochgate, Spark" in x for x in lines)
