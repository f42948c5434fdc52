"""Close rules applied to the ledger: time-based sources close each epoch once it has ended and
its grace has passed, marker-based ones as each worker delivers its done-marker, explicit ones
never by themselves; passed epochs with nothing sent are sealed empty, and no worker moves back."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from pipelines.run.scheduling import close_epochs
from progress.ledger import Ledger
from tests.fixtures.feeds import GRACE, ORIGIN, at, feeds, mark

pytestmark = pytest.mark.ledger


def workers(ledger: Ledger, source: str, count: int = 2) -> list[object]:
    return [ledger.worker_time("feeds", source, w) for w in range(count)]


def test_time_based_sources_close_after_the_grace_period(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.duckdb")
    pipeline = feeds(tmp_path / "markers")
    early = close_epochs(ledger, pipeline, at(1) + GRACE - timedelta(seconds=1))
    assert early.opened == 2
    assert early.closed == ()
    assert workers(ledger, "events") == [0, 0]
    assert any("holds epoch 0 until 2026-11-02T01:10:00+00:00" in w for w in early.lines())

    tick = close_epochs(ledger, pipeline, at(3) + GRACE)  # epochs 0, 1 and 2 are over
    assert workers(ledger, "events") == [3, 3]
    assert [c.describe() for c in tick.closed] == [
        f"source events, worker {w}: closed epochs 0-2 (ended, grace 0:10:00 over at "
        "2026-11-02T03:10:00+00:00)"
        for w in (0, 1)
    ]
    # Nothing was sent: each passed epoch is sealed with an empty message, so stages run it.
    for epoch in range(3):
        assert [m.path for m in ledger.message("feeds", "events", 0, epoch)] == [None, None]
    assert workers(ledger, "manual", 1) == [0]  # explicit: only its workers close it
    assert close_epochs(ledger, pipeline, at(3) + GRACE).closed == ()  # nothing more to do
    assert ledger.verify().ok


def test_marker_based_sources_close_per_worker_as_markers_arrive(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.duckdb")
    markers = tmp_path / "markers"
    pipeline = feeds(markers)
    mark(markers, 0, 0)
    mark(markers, 1, 0)
    mark(markers, 0, 1)
    mark(markers, 2, 1)  # a marker past a gap closes nothing yet
    tick = close_epochs(ledger, pipeline, at(0.5))
    assert workers(ledger, "files") == [2, 1]
    assert [c.describe() for c in tick.closed if c.source == "files"] == [
        "source files, worker 0: closed epochs 0-1 (done-marker delivered)",
        "source files, worker 1: closed epoch 0 (done-marker delivered)",
    ]
    waits = [w.describe() for w in tick.waiting if w.source == "files"]
    marker = markers / "epoch=1" / "worker=1.done"
    assert waits[1] == f"source files, worker 1 holds epoch 1 until its done-marker {marker}"
    status = {s.stage: s for s in ledger.status("feeds")}
    assert status["files_out"].done == ()
    assert 0 in status["files_out"].ready  # every worker delivered epoch 0's marker


def test_a_worker_that_moved_on_by_itself_is_not_moved_back(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.duckdb")
    pipeline = feeds(tmp_path / "markers")
    close_epochs(ledger, pipeline, ORIGIN)
    ledger.advance("feeds", "events", 1, 5, seal=True)
    ledger.close("feeds", "events", 0)
    tick = close_epochs(ledger, pipeline, at(2) + GRACE)
    assert workers(ledger, "events") == [None, 5]
    assert [c for c in tick.closed if c.source == "events"] == []
