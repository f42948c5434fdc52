"""The capture bench in its fast form: every figure is measured and printed (the figures are
for the full form, ``BENCH_SIZE=full``, never asserted in a test)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tests.bench.scripts import load

pytestmark = pytest.mark.spark


def test_the_fast_form_prints_every_figure_with_its_goal(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    module = load("bench_capture")
    module.run(module.SIZES["fast"], spark, tmp_path)
    module.throughput(module.SIZES["fast"], spark, tmp_path)
    module.follow_latency(module.SIZES["fast"], spark, tmp_path)
    out = capsys.readouterr().out
    assert f"poll interval {module.POLL}s" in out
    for figure in (
        "per-epoch time capture on / off (median)",
        "a commit's capture check / the commit (no capture)",
        "replay feeding: events/s",
        "replay feeding: rows/s",
        "replay feeding + running: events/s",
        "replay feeding + running: rows/s",
        "follow: upstream commit to downstream run start (median)",
    ):
        line = next((x for x in out.splitlines() if x.startswith(figure)), None)
        assert line is not None, f"{figure!r} not printed:\n{out}"
        assert "(goal " in line
