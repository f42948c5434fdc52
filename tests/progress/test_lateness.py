"""Lateness and completion from a scripted timeline of releases with known delays: the figures
are exactly the delays scripted, whatever the clock's start, and the last release of an epoch
is when the input that reads it became complete."""

from __future__ import annotations

import statistics
from datetime import datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from progress.lateness import Release, complete_at, lateness, released_at

pytestmark = pytest.mark.unit

T0 = datetime(2026, 11, 28, 8, 0)


def timeline(delays: list[list[float]], start: datetime = T0) -> list[Release]:
    """Epoch ``e`` opens at minute ``e``; worker ``w`` releases it ``delays[e][w]`` seconds
    later (an advance from ``e`` to ``e + 1``); the last move of each worker is its close."""
    out = []
    epochs = len(delays)
    for e, row in enumerate(delays):
        for w, delay in enumerate(row):
            at = start + timedelta(minutes=e, seconds=delay)
            out.append(Release("cards", w, e, None if e == epochs - 1 else e + 1, at))
    return out


def test_a_late_worker_is_named_with_its_median_and_worst() -> None:
    delays = [[0, 5, 40], [0, 3, 42], [1, 0, 65], [0, 2, 40]]
    found = lateness(timeline(delays), "cards", 3)
    assert [(w.worker, w.epochs) for w in found] == [(0, 4), (1, 4), (2, 4)]
    assert found[2].median_seconds == 41  # 40, 42, 65, 40 after the first: median of 4
    assert found[2].worst_seconds == 65
    assert found[1].worst_seconds == 5
    assert found[2].describe() == (
        "cards worker 2: 41.0s late (median), 65.0s at worst, over 4 epoch(s)"
    )
    last_two = lateness(timeline(delays), "cards", 3, last=2)
    assert (last_two[2].epochs, last_two[2].worst_seconds) == (2, 65)


def test_an_input_is_complete_at_the_last_release_above_it() -> None:
    moves = timeline([[0, 7], [2, 1]])
    moves.append(Release("accounts", 0, 0, 5, T0 + timedelta(seconds=30)))
    assert complete_at(moves, {"cards": 2}, {"cards": [0]}) == T0 + timedelta(seconds=7)
    both = complete_at(moves, {"cards": 2, "accounts": 1}, {"cards": [0], "accounts": [0]})
    assert both == T0 + timedelta(seconds=30)
    assert complete_at(moves, {"cards": 2}, {"cards": [1]}) == T0 + timedelta(minutes=1, seconds=2)
    assert complete_at(moves, {"accounts": 1}, {"accounts": [5]}) is None  # still held
    held = [r for r in moves if (r.worker, r.start) != (1, 1)]
    assert released_at(held, "cards", 1, 1) is None
    assert complete_at(held, {"cards": 2}, {"cards": [1]}) is None
    assert lateness([], "cards", 2) == []


@given(
    delays=st.lists(st.lists(st.integers(0, 600), min_size=3, max_size=3), min_size=1, max_size=8),
    offset=st.integers(-(10**6), 10**6),
)
def test_the_figures_are_the_scripted_delays_whatever_the_clock(
    delays: list[list[int]], offset: int
) -> None:
    start = T0 + timedelta(seconds=offset)
    found = lateness(timeline([[float(d) for d in row] for row in delays], start), "cards", 3)
    for w in range(3):
        late = [row[w] - min(row) for row in delays]
        assert found[w].worst_seconds == max(late)
        assert found[w].median_seconds == statistics.median(late)
    assert min(f.worst_seconds for f in found) >= 0
