"""The incremental bench at a tiny size: both figures and the ratio with its goal are printed,
and its section is written beside another script's (the figures themselves are for the full
form, ``BENCH_SIZE=full``, never asserted in a test)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tests.bench.scripts import goal_lines, load, results_beside_another, section_of

pytestmark = pytest.mark.spark


def test_a_tiny_run_prints_every_figure_and_the_goal_and_writes_its_section(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    module = load("bench_incremental")
    size = module.Size(rows=100, accounts=50, late=4, early=1, around=1)
    found = module.run(size, spark, tmp_path / "work")
    assert len(found.early) == len(found.late) == 3
    out = capsys.readouterr().out.splitlines()
    figures = (
        "epoch ~1, send to committed output: median ",
        "epoch ~4, send to committed output: median ",
        "ratio late / early: ",
    )
    for figure in figures:
        assert any(x.startswith(figure) for x in out), f"{figure!r} not printed:\n{out}"
    (goal,) = goal_lines(out)
    assert goal.startswith("ratio late / early: ")
    assert "(of the medians; goal <= 1.20: " in goal
    results = results_beside_another(tmp_path / "RESULTS.md")
    module.write_section(results, "bench_incremental", module.incremental_section(found, "tiny"))
    section = section_of(results, "bench_incremental")
    assert "- size: tiny; 100 movements per epoch over 50 accounts, 6 epochs" in section
    assert f"- {goal}\n" in section
    for figure in figures[:2]:
        assert f"- {figure}" in section
    assert section.count(" over 3)") == 2


def test_overlapping_windows_are_refused(spark: SparkSession, tmp_path: Path) -> None:
    module = load("bench_incremental")
    with pytest.raises(SystemExit, match="must not overlap"):
        module.run(module.Size(rows=10, accounts=5, late=3, early=1, around=1), spark, tmp_path)
