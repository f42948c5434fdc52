"""Part C of the Dagster bench (the daemon path) in its fast form: one tiny epoch under
``dagster dev`` with the warm launcher and a local Spark master, against ``Runtime.run()``; the
figures are printed and written to a results file (their values are for the full form)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tests.bench.scripts import load

pytestmark = [pytest.mark.spark, pytest.mark.dagster, pytest.mark.slow]


def test_the_daemon_part_prints_the_direct_and_daemon_times_and_the_goal(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    module = load("daemon_path")
    results = tmp_path / "RESULTS.md"
    module.run(
        tmp_path / "run",
        spark,
        "local[2]",
        rows=60,
        epochs=1,
        warmup=0,
        interval=1,
        launchers=["warm"],
        results=results,
    )
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert any(x.startswith("direct (`epochgate run`, same Spark): median ") for x in lines), out
    daemon = next((x for x in lines if x.startswith("daemon, warm launcher: median ")), None)
    assert daemon is not None, out
    assert "goal <= 1 + 1.5 x " in daemon
    assert daemon.endswith((": met", ": NOT met"))
    for part in ("sensor (last advance", "in the run queue until launched", "the later stages"):
        assert part in out, f"{part!r} not in the breakdown:\n{out}"
    written = results.read_text()
    assert "<!-- bench_dagster:start -->" in written
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
