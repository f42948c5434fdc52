"""The capture bench in its fast form: every figure is measured and printed, with its goal and
whether it is met where it has one, and its section is written beside another script's (the
figures are for the full form, ``BENCH_SIZE=full``, never asserted in a test)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tests.bench.scripts import goal_lines, load, results_beside_another, section_of

pytestmark = [pytest.mark.spark, pytest.mark.slow(65)]

WITH_GOALS = (
    "per-epoch time capture on / off (median)",
    "a commit's capture check / the commit (no capture)",
    "follow: upstream commit to downstream run start (median)",
)
WITHOUT = (
    "replay feeding: events/s",
    "replay feeding: rows/s",
    "replay feeding + running: events/s",
    "replay feeding + running: rows/s",
)
DETAILS = (
    "per epoch, capture on: median ",
    "per epoch, capture off: median ",
    "no capture, the check: median ",
    "no capture, an advance: median ",
    "replay() with nothing new: median ",
    "follow, per epoch after the first: median ",
)


def test_the_fast_form_prints_every_figure_with_its_goal_and_writes_its_section(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    module = load("bench_capture")
    size = module.SIZES["fast"]
    lines = module.run(size, spark, tmp_path)
    lines += module.throughput(size, spark, tmp_path)
    lines += module.follow_latency(size, spark, tmp_path)
    out = capsys.readouterr().out.splitlines()
    assert f"  poll interval {module.POLL}s" in out
    goals = goal_lines(out)
    assert [g.split(":", 1)[0] for g in goals] == [f.split(":", 1)[0] for f in WITH_GOALS]
    assert "(2 s plus the poll interval; goal <= 2.2s: " in goals[-1]
    for figure in WITHOUT:
        line = next((x for x in out if x.startswith(figure)), None)
        assert line is not None, f"{figure!r} not printed:\n{out}"
        assert line.endswith("(no goal set)"), line
    for detail in DETAILS:
        assert any(x.startswith(f"  {detail}") for x in out), f"{detail!r} not printed:\n{out}"
    results = results_beside_another(tmp_path / "RESULTS.md")
    module.write_section(results, "bench_capture", module.capture_section(lines, size, "fast"))
    section = section_of(results, "bench_capture")
    assert (
        "- size: fast; `bank` without rings, 2 epochs (the first a warm-up) of 2,000 rows"
        in section
    )
    for line in lines:
        assert f"- {line}\n" in section, section
