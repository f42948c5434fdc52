"""The overhead bench at a tiny size: its ratios (small epochs, with and without rings) are
measured and printed with their goals, the profile names every stage, and its section of the
results file is written (the figures themselves are for the full form, ``BENCH_SIZE=full``,
never asserted in a test; the large epochs run the same code with more rows)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tests.bench.scripts import load

pytestmark = pytest.mark.spark


def test_the_fast_form_prints_every_ratio_with_its_goal_and_a_profile(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    module = load("bench_overhead")
    size = module.Size(small=200, large=1_000, epochs=1, accounts=500)
    ratios = module.run(size, spark, tmp_path / "work", profile=True, sizes=("small",))
    out = capsys.readouterr().out
    for what in (
        "bank without rings (validations not materialized), 200 rows",
        "bank (validations not materialized), 200 rows",
    ):
        line = next((x for x in out.splitlines() if what in x and "ratio" in x), None)
        assert line is not None, f"{what!r} not printed:\n{out}"
        assert "(goal <= " in line
        assert " met)" in line or "NOT met)" in line
    assert [r.goal for r in ratios] == [1.5, 1.5]
    results = tmp_path / "RESULTS.md"
    results.write_text("# Benchmark results\n\n<!-- other:start -->\nkept\n<!-- other:end -->\n")
    module.write_section(results, "bench_overhead", module.section(ratios, size.epochs))
    text = results.read_text()
    assert "kept" in text
    section = text.split("<!-- bench_overhead:start -->", 1)[1]
    for stage in ("valid_cards", "movements", "balances", "enriched", "region_totals", "rings"):
        assert f"| {stage} |" in section, section
    assert "goal <= 1.50" in section
    assert "Outside the stage runs, per epoch: send and advance" in section
