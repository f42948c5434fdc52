"""The safety property (invariant 1) over random dataflows, workers and delivery orders."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from progress import Tracker
from tests.progress.safety_model import (
    ReadyAtAnyImpliedTime,
    SafetyViolationError,
    TrackerFactory,
    delaying_everything,
    ignoring_summaries,
    simulate,
)

pytestmark = pytest.mark.unit

SETTINGS = settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


@SETTINGS
@given(st.data())
def test_ready_is_safe_in_every_view(data: st.DataObject) -> None:
    world = simulate(data, Tracker)
    world.check()
    assert world.claims or not world.spec.stages


@SETTINGS
@given(st.data())
def test_ready_agrees_with_blockers(data: st.DataObject) -> None:
    world = simulate(data, Tracker)
    for view in world.views:
        for stage in world.spec.stages:
            for time in world.spec.times():
                assert view.tracker.ready(stage, time) == (not view.tracker.blockers(stage, time))


@pytest.mark.parametrize("broken", [ignoring_summaries, delaying_everything, ReadyAtAnyImpliedTime])
def test_the_property_catches_a_broken_tracker(broken: TrackerFactory) -> None:
    # Finding a counterexample is the point; shrinking it would only cost time.
    @settings(SETTINGS, derandomize=True, database=None, max_examples=500, phases=[Phase.generate])
    @given(st.data())
    def prop(data: st.DataObject) -> None:
        simulate(data, broken).check()

    with pytest.raises(SafetyViolationError):
        prop()
