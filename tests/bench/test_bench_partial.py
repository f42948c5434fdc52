"""The partial-state bench in its fast form: every figure is measured and printed with its goal
and whether it is met, and its section is written beside another script's (the figures
themselves are for the full form, ``BENCH_SIZE=full``, never asserted in a test)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tests.bench.scripts import goal_lines, load, results_beside_another, section_of

pytestmark = pytest.mark.spark

FIGURES = (
    "balances: state bytes partial / full",
    "per_account: state bytes partial / full",
    "balances: per-epoch time partial / full",
    "per_account: per-epoch time partial / full",
    "balances: lookup hit, median",
    "per_account: lookup hit, median",
    "per_account: rebuilding the full twin / one miss",
    "balances: rebuilding the full twin / one miss",
    "new partial view's first read vs full view's backfill",
    "per_account: one key's upquery at 2 / at 1 epochs",
)
DETAILS = (
    "send of one epoch's movements: median ",
    "one never-read key's upquery at 1 epochs: median ",
    "one never-read key's upquery at 2 epochs: median ",
    "balances: per-epoch time, partial: median ",
    "balances: per-epoch time, full twin: median ",
    "per_account: lookup hits: median ",
    "balances: one miss: median ",
    "new full view's backfill of every epoch: ",
)


def test_the_fast_form_prints_every_figure_with_its_goal_and_writes_its_section(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    module = load("bench_partial")
    size = module.SIZES["fast"]
    lines = module.run(size, spark, tmp_path / "work")
    out = capsys.readouterr().out.splitlines()
    goals = goal_lines(out)
    for figure in FIGURES:
        line = next((x for x in goals if x.startswith(figure)), None)
        assert line is not None, f"{figure!r} not printed with its goal:\n{out}"
    assert len(goals) == len(FIGURES)
    for detail in DETAILS:
        assert any(x.startswith(f"  {detail}") for x in out), f"{detail!r} not printed:\n{out}"
    assert goal_lines(lines) == goals
    results = results_beside_another(tmp_path / "RESULTS.md")
    module.write_section(results, "bench_partial", module.partial_section(lines, size, "fast"))
    section = section_of(results, "bench_partial")
    assert "- size: fast; 5,000 accounts, 2 epochs of 5,000 rows" in section
    for line in lines:
        assert f"- {line}\n" in section, section
    assert "(spread " in section
