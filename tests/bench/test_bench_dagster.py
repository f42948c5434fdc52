"""The Dagster bench in tiny forms: part A (one epoch of ``bank`` through Dagster and through
``Runtime.run()``, outputs compared), part B (sensor ticks over a short ledger), part C (one
tiny epoch under ``dagster dev`` with the warm launcher on a Sail server, against
``Runtime.run()``, both checked against the oracle), and its sizes. The figures are printed
and written to a results file; their values are for the full form, never asserted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tests.bench.scripts import BENCH, load
from tests.environment import without_settings

pytestmark = [pytest.mark.spark, pytest.mark.dagster, pytest.mark.slow(70)]


@pytest.mark.sail
def test_the_daemon_part_on_sail_prints_the_direct_and_daemon_times_and_the_goal(
    tmp_path: Path,
) -> None:
    """``bench_dagster.py --part c --spark sail`` as a user runs it: a Sail server that the run
    workers under ``dagster dev`` and the direct side share, both sides' outputs checked
    against the oracle, the goal said (a Connect session cannot share the test's process with
    its classic session: the script runs in a child)."""
    results = tmp_path / "RESULTS.md"
    done = subprocess.run(
        [
            *(sys.executable, str(BENCH / "bench_dagster.py"), "--part", "c", "--spark", "sail"),
            *("--daemon-rows", "60", "--daemon-epochs", "1", "--daemon-warmup", "0"),
            *("--interval", "1", "--launchers", "warm", "--results", str(results)),
        ],
        env=without_settings(),
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    out = done.stdout
    assert done.returncode == 0, out[-4000:] + done.stderr[-3000:]
    lines = out.splitlines()
    assert "Spark at sc://127.0.0.1:" in out, out
    for side in ("daemon, warm launcher", "epochgate run"):
        assert f"  {side}: every stage at every epoch equals the oracle" in lines, out
    assert any(x.startswith("direct (`epochgate run`, same Spark): median ") for x in lines), out
    daemon = next((x for x in lines if x.startswith("daemon, warm launcher: median ")), None)
    assert daemon is not None, out
    assert "goal <= 1 + 1.5 x " in daemon
    assert daemon.endswith((": met", ": NOT met"))
    for part in ("sensor (last advance", "in the run queue until launched", "the later stages"):
        assert part in out, f"{part!r} not in the breakdown:\n{out}"
    written = results.read_text()
    assert "<!-- bench_dagster_sail:start -->" in written  # beside the Connect server's section
    assert "<!-- bench_dagster:start -->" not in written
    assert "## The daemon path on Sail (`bench_dagster.py --part c --spark sail`)" in written
    assert daemon in written


def test_the_sensor_tick_part_writes_its_figure_with_its_goal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import argparse

    module = load("bench_dagster")
    args = argparse.Namespace(tick_epochs=12, tick_stages=4, ticks=3, profile=False)
    lines = module.part_b(args)
    assert len(lines) == 1
    assert lines[0].startswith("frontier sensor tick, 4 stages x 12 epochs in the ledger")
    assert lines[0].endswith(("(goal < 200 ms: met)", "(goal < 200 ms: NOT met)"))
    results = tmp_path / "RESULTS.md"
    results.write_text("# Benchmark results\n\n<!-- other:start -->\nkept\n<!-- other:end -->\n")
    module.write_section(results, "bench_dagster_runs", module.runs_section(lines))
    text = results.read_text()
    assert "kept" in text
    assert lines[0] in text.split("<!-- bench_dagster_runs:start -->", 1)[1]
    assert "sensor tick (Driver.tick)" in capsys.readouterr().out


@pytest.mark.unit
def test_its_sizes_follow_bench_size_and_the_command_line_wins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    module = load("bench_dagster")
    monkeypatch.setenv("BENCH_SIZE", "fast")
    fast = module.options([])
    assert (fast.size, fast.rows, fast.tick_epochs, fast.daemon_epochs) == ("fast", 20_000, 100, 1)
    assert module.options(["--rows", "5"]).rows == 5
    monkeypatch.setenv("BENCH_SIZE", "full")
    full = module.options([])
    assert (full.size, full.rows, full.tick_epochs, full.daemon_epochs) == (
        "full",
        1_000_000,
        1_000,
        3,
    )


def test_the_dagster_against_run_part_checks_both_sides_and_prints_its_ratio(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import argparse

    module = load("bench_dagster")
    args = argparse.Namespace(rows=200, epochs=1, warmup=0, accounts=50, no_rings=True)
    lines = module.bench_bank(args, tmp_path, spark, "local[2]")
    out = capsys.readouterr().out
    assert "same outputs: " in out  # every stage, every epoch, on both sides
    assert lines[-1].startswith("median of the per-epoch ratios Dagster / run: ")
    assert lines[-1].endswith("this run used 200)")  # the goal is for 1,000,000 rows
