"""The scaling bench at a tiny size: every axis measured, each growth printed with its goal,
the closed epochs copied in the ledger leave it verified and the pipeline running on, and its
section and plots written (the figures are for ``BENCH_SIZE=full``, never asserted)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tests.bench.scripts import load

pytestmark = pytest.mark.spark


def test_every_axis_is_measured_and_written_with_its_goals(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    module = load("bench_scaling")
    plan = module.Plan(
        rows=(200, 400),
        stages=(1, 3),
        closed=(2, 6),
        epochs=1,
        stage_rows=50,
        closed_rows=40,
        accounts=100,
    )
    points = module.run(plan, spark, tmp_path / "work")
    out = capsys.readouterr().out
    assert {(p.axis, p.x) for p in points} >= {
        ("rows", 200),
        ("rows", 400),
        ("chain", 1),
        ("chain", 3),
        ("fan-out", 3),
        ("closed", 6),
    }
    closed = [p for p in points if p.axis == "closed"]
    assert [p.x for p in closed] == [2, 6], "the copied epochs put the second setting behind 6"
    for name in (
        "linear in rows, epochgate",
        "linear in rows, plain PySpark",
        "linear or better in stages (a chain), epochgate",
        "linear or better in stages (side by side), epochgate",
        "flat in closed epochs, epochgate",
    ):
        line = next((x for x in out.splitlines() if x.startswith(name)), None)
        assert line is not None, f"{name!r} not printed:\n{out}"
        assert "(goal <= 1.2: " in line
    results = tmp_path / "RESULTS.md"
    results.write_text("# Benchmark results\n\n<!-- other:start -->\nkept\n<!-- other:end -->\n")
    made = module.plot(points, tmp_path / "plots")
    assert sorted(p.name for p in made) == [
        "scaling_closed.png",
        "scaling_rows.png",
        "scaling_stages.png",
    ]
    body = module.section(points, ["- machine: here"], module.plot_links(results, made))
    module.write_section(results, "bench_scaling", body)
    text = results.read_text()
    assert "kept" in text
    assert "![scaling_rows](plots/scaling_rows.png)" in text
    assert "flat in closed epochs" in text.split("<!-- bench_scaling:start -->", 1)[1]
