"""The tracker bench at a tiny size, through its command line: every figure and the goal are
printed, and its section is written beside another script's (the figures themselves are for
the full form, ``BENCH_SIZE=full``, never asserted in a test)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bench.scripts import goal_lines, load, results_beside_another, section_of

pytestmark = pytest.mark.unit

FIGURES = (
    "updates applied per second, 10 closed epochs: median ",
    "updates applied per second, 40 closed epochs: median ",
    "ready() cost: median ",
    "per-update cost ratio, 40 vs 10 closed epochs: ",
    "open pointstamps at the end: ",
)


def test_a_tiny_run_prints_every_figure_and_writes_its_section(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    module = load("bench_tracker")
    monkeypatch.delenv("BENCH_SIZE", raising=False)
    results = results_beside_another(tmp_path / "RESULTS.md")
    argv = ["--closed", "40", "--windows", "3", "--window-epochs", "4", "--results", str(results)]
    module.main(argv)
    out = capsys.readouterr().out.splitlines()
    for figure in FIGURES:
        assert any(x.startswith(figure) for x in out), f"{figure!r} not printed:\n{out}"
    (goal,) = goal_lines(out)
    assert "(of the medians; goal <= 1.20: " in goal
    section = section_of(results, "bench_tracker")
    assert "- size: fast; " in section
    assert f"- {goal}\n" in section
    for figure in FIGURES:
        assert f"- {figure}" in section, section
    assert "(spread " in section
    assert " over 3)" in section


def test_an_unknown_size_is_refused_before_anything_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    module = load("bench_tracker")
    monkeypatch.setenv("BENCH_SIZE", "huge")
    with pytest.raises(SystemExit, match="BENCH_SIZE must be one of fast, full, not 'huge'"):
        module.main(["--results", "/nonexistent/RESULTS.md"])
