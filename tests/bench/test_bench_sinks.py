"""The sinks bench in its fast form: each format's publish and direct write are measured and
printed, each ratio with its goal and whether it is met, and its section is written beside
another script's (the figures are for the full form, ``BENCH_SIZE=full``, never asserted)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bench.scripts import goal_lines, load, written_section

pytestmark = pytest.mark.unit


def test_the_fast_form_prints_each_format_with_its_goal_and_writes_its_section(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    module = load("bench_sinks")
    size = module.SIZES["fast"]
    lines = module.run(size, tmp_path)
    out = capsys.readouterr().out.splitlines()
    goals = goal_lines(out)
    assert [g.split(" (", 1)[0].rsplit(": ", 1)[0] for g in goals] == [
        "parquet: publish / direct write",
        "delta: publish / direct write",
        "iceberg: publish / direct write",
    ]
    for fmt in ("parquet", "delta", "iceberg"):
        for what in ("publish per epoch", "direct write per epoch"):
            assert any(x.startswith(f"  {fmt}, {what}: median ") for x in out), out
    body = module.sinks_section(lines, size, "fast")
    section = written_section(
        tmp_path / "RESULTS.md",
        "bench_sinks",
        lambda path: module.write_section(path, "bench_sinks", body),
        lines,
    )
    assert "- size: fast; 3 epochs (the first a warm-up) of 20,000 rows, 3 columns" in section
