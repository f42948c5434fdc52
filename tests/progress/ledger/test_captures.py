"""Captures in the ledger: their rows, the snapshot of a captured stream, and the commit hook
that tells the committing process which captured pipelines it wrote."""

from __future__ import annotations

from pathlib import Path

import pytest

from progress.errors import CaptureError, TimeRegressionError
from progress.ledger import Ledger, MessageEntry
from tests.progress.ledger.scenario import bank_graph, run_epoch

pytestmark = pytest.mark.ledger


def ledger_with_bank(tmp_path: Path) -> tuple[Ledger, list[frozenset[str]]]:
    ledger = Ledger(tmp_path / "l.duckdb")
    ledger.register("bank", bank_graph())
    ledger.register("other", bank_graph())
    told: list[frozenset[str]] = []
    ledger.on_commit(told.append)
    ledger.on_commit(told.append)  # added once
    return ledger, told


def test_only_commits_of_a_captured_pipeline_are_told_after_the_session(tmp_path: Path) -> None:
    ledger, told = ledger_with_bank(tmp_path)
    run_epoch(ledger, 0)
    assert told == []  # nothing captured: no listener call
    found = ledger.start_capture("bank", "validate", directory="/caps/v", stream="s1")
    assert (found.stage, found.worker, found.active) == ("validate", None, True)
    assert told == []  # a capture's row is no batch
    with ledger.session():
        run_epoch(ledger, 1)
        assert told == []  # not while the session holds the ledger
    assert told == [frozenset({"bank"})]  # once, when it ended
    ledger.send("other", "card_payments", 0, MessageEntry("card_payments", 0, 0, "x"))
    assert told == [frozenset({"bank"})]  # another pipeline
    with pytest.raises(TimeRegressionError):
        ledger.advance("bank", "card_payments", 0, 0)  # refused: nothing committed
    assert len(told) == 1
    ledger.stop_capture("bank", "/caps/v")
    run_epoch(ledger, 2)
    assert len(told) == 1  # stopped
    assert [c.active for c in ledger.captures("bank")] == [False]
    assert ledger.captures("bank", active=True) == []


def test_a_capture_row_is_refused_twice_and_names_its_worker(tmp_path: Path) -> None:
    ledger, _ = ledger_with_bank(tmp_path)
    ledger.start_capture("bank", "card_payments", directory="/caps/w", stream="s", worker=2)
    with pytest.raises(CaptureError, match="already records stage 'card_payments'"):
        ledger.start_capture("bank", "validate", directory="/caps/w", stream="t")
    with pytest.raises(CaptureError, match="no input worker 0"):
        ledger.start_capture("bank", "validate", directory="/caps/x", stream="t", worker=0)
    with pytest.raises(CaptureError, match="no capture records"):
        ledger.stop_capture("bank", "/caps/nowhere")
    ledger.stop_capture("bank", "/caps/w")
    again = ledger.start_capture("bank", "validate", directory="/caps/w", stream="u")
    assert (again.stage, again.stream, again.active) == ("validate", "u", True)


def test_a_snapshot_holds_the_stream_its_frontier_and_its_revisions(tmp_path: Path) -> None:
    ledger, _ = ledger_with_bank(tmp_path)
    whole = ledger.start_capture("bank", "validate", directory="/caps/v", stream="s")
    worker = ledger.start_capture(
        "bank", "card_payments", directory="/caps/w", stream="t", worker=1
    )
    run_epoch(ledger, 0)
    snap = ledger.capture_snapshot(whole, after=0, floor=0)
    assert snap.frontier == (1,)
    assert [(m.time, m.revision) for m in snap.window] == [(0, False)]
    w = ledger.capture_snapshot(worker, after=0, floor=0)
    assert w.frontier == (1,)
    assert [(m.time, m.path) for m in w.window] == [(0, None)]  # worker 1's message only
    ledger.correct("bank", "card_payments", 1, MessageEntry("card_payments", 0, 0, "fix"))
    w = ledger.capture_snapshot(worker, after=w.high_water, floor=0)
    assert [(m.time, m.revision) for m in w.window] == [(0, True)]
    assert w.revisions == ((0, w.high_water),)
    assert [m.batch for m in ledger.capture_current(worker, [0])] == [w.high_water]
    history = ledger.capture_snapshot(whole, after=None, floor=None, history_from=0)
    assert [m.time for m in history.current] == [0]
    ledger.close("bank", "card_payments", 1)
    assert ledger.capture_snapshot(worker, after=None, floor=None).frontier == ()
