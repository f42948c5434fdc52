"""The ledger bench at a tiny size, through its command line (its committing processes
included): every figure and goal is printed, and its section is written beside another
script's (the figures themselves are for the full form, ``BENCH_SIZE=full``, never asserted in
a test)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bench.scripts import goal_lines, load, results_beside_another, section_of

pytestmark = pytest.mark.ledger

FIGURES = (
    "commit, 20 updates, one process, connection per commit: median ",
    "commit, 20 updates, one process, held session: median ",
    "commit, 20 updates, 4 processes at once (connection per commit): median ",
    "ready(), 3 stages, 10 closed epochs, in a session: median ",
    "ready(), 3 stages, 10 closed epochs, own connection: median ",
    "ready(), 3 stages, 30 closed epochs, in a session: median ",
    "ready(), 3 stages, 30 closed epochs, own connection: median ",
    "ready() ratio, 30 vs 10 closed epochs, in a session: ",
    "ready() ratio, 30 vs 10 closed epochs, own connection: ",
    "ledger file after 30 epochs: ",
    "growth under per-stage commits (7 batches per epoch): ",
    "verify after the run: ok ",
)


def test_a_tiny_run_prints_every_figure_and_goal_and_writes_its_section(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    module = load("bench_ledger")
    tiny = module.Size(closed=30, commits=3, session_commits=5, ready_calls=20, extra=2, stages=3)
    monkeypatch.setitem(module.SIZES, "fast", tiny)
    monkeypatch.delenv("BENCH_SIZE", raising=False)
    results = results_beside_another(tmp_path / "RESULTS.md")
    module.main(["--stages", "3", "--results", str(results)])
    out = capsys.readouterr().out.splitlines()
    for figure in FIGURES:
        assert any(x.startswith(figure) for x in out), f"{figure!r} not printed:\n{out}"
    goals = goal_lines(out)
    assert [g.split(":", 1)[0] for g in goals] == [
        "commit, 20 updates, one process, held session",
        "ready() ratio, 30 vs 10 closed epochs, in a session",
        "ready() ratio, 30 vs 10 closed epochs, own connection",
    ]
    assert " ms (goal <= 5.00 ms: " in goals[0]
    assert all("(of the medians; goal <= 1.50: " in g for g in goals[1:])
    section = section_of(results, "bench_ledger")
    assert "- size: fast; a chain of 3 stages; " in section
    for line in (*goals, *(x for x in out if x.startswith(FIGURES[-1]))):
        assert f"- {line}\n" in section, section
    assert " over 12)" in section  # the 4 processes' commits, 3 each
