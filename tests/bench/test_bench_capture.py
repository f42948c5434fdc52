"""The capture bench in its fast form: every figure is measured and printed (the figures are
for the full form, ``BENCH_SIZE=full``, never asserted in a test)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark

BENCH = Path(__file__).resolve().parents[2] / "bench" / "bench_capture.py"


def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_capture", BENCH)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_fast_form_prints_every_figure_with_its_goal(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    module = bench()
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
