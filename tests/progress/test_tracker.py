"""Tracker behaviour beyond the golden cases: atomic batches, handles, probes, blockers."""

from __future__ import annotations

import pytest

import progress
from progress import (
    MAX_EPOCH,
    ClosedHandleError,
    EpochNotReachedError,
    GraphBuilder,
    HandleError,
    InvalidInputTimeError,
    InvalidTimeError,
    Source,
    Target,
    TimeRegressionError,
    Tracker,
    UnknownLocationError,
    UnknownNodeError,
    input_handle,
)

pytestmark = pytest.mark.unit


def tracker() -> Tracker:
    b = GraphBuilder()
    b.add_node("payments", inputs=0, outputs=1, workers=2)
    b.add_node("validate", inputs=1, outputs=1, workers=0)
    b.add_edge(Source("payments"), Target("validate"))
    t = Tracker(b.compile())
    t.apply(t.initial_batch())
    return t


def test_a_batch_with_one_bad_entry_changes_nothing() -> None:
    t = tracker()
    before = t.pointstamps()
    with pytest.raises(UnknownLocationError) as err:
        t.apply([(Target("validate"), 0, 1), (Target("ghost"), 0, 1)])
    assert err.value.location == Target("ghost")
    with pytest.raises(InvalidTimeError):
        t.apply([(Target("validate"), 0, 1), (Target("validate"), -1, 1)])
    with pytest.raises(InvalidTimeError):
        t.apply([(Target("validate"), MAX_EPOCH + 1, 1)])
    assert t.pointstamps() == before


def test_handles_refuse_going_back_and_acting_after_close() -> None:
    t = tracker()
    h = input_handle(t, "payments", 1)
    t.apply(h.advance_to(4))
    t.apply(h.advance_to(6))
    assert h.advance_to(6) == []  # a retry: to where it is, nothing happens
    for earlier in (4, 5, 0):  # once reached (4) or never (5): one rule
        with pytest.raises(TimeRegressionError) as err:
            h.advance_to(earlier)
        e = err.value
        assert (e.node, e.source, e.worker, e.current, e.requested) == (
            "payments",
            "payments",
            1,
            6,
            earlier,
        )
    assert str(err.value) == (
        "source 'payments', worker 1, at epoch 6: cannot advance to epoch 0; epochs only move "
        "forward (advancing to the epoch it is at does nothing); nothing was committed"
    )
    for bad, reason in (("3", "expected an int epoch"), (-1, "epochs lie in")):
        with pytest.raises(InvalidInputTimeError) as invalid:
            h.advance_to(bad)  # type: ignore[arg-type]
        assert (invalid.value.source, invalid.value.worker, invalid.value.requested) == (
            "payments",
            1,
            bad,
        )
        assert reason in str(invalid.value)
        assert isinstance(invalid.value, InvalidTimeError)
    assert h.correct(6) == h.correct(2) == []  # reached: moves nothing
    with pytest.raises(EpochNotReachedError, match="cannot correct epoch 7"):
        h.correct(7)
    t.apply(h.close())
    assert h.close() == []  # closing again does nothing
    assert h.correct(9) == []  # a closed worker has passed every epoch
    for action in (h.send, lambda: h.advance_to(9), lambda: h.advance_to(6)):
        with pytest.raises(ClosedHandleError):
            action()
    assert t.frontier(Source("payments")).elements == (0,)  # worker 0 still at 0
    with pytest.raises(HandleError):
        input_handle(t, "payments", 2)
    with pytest.raises(HandleError):
        input_handle(t, "validate", 0)


def test_a_handle_sends_at_a_later_time_and_readiness_still_waits_for_its_capability() -> None:
    t = tracker()
    h = input_handle(t, "payments", 0)
    t.apply(h.advance_to(2))
    t.apply(input_handle(t, "payments", 1).close())
    assert h.send(at=2) == h.send() == [(Target("validate"), 2, 1)]
    t.apply(h.send(at=5))  # a message ahead of the capability, which still holds 2
    assert not t.ready("validate", 5)  # the capability at 2 may still send at 5
    t.apply(h.advance_to(5))
    assert not t.ready("validate", 5)
    t.apply(h.advance_to(6))
    assert t.ready("validate", 5)
    with pytest.raises(TimeRegressionError) as err:
        h.send(at=4)
    assert (err.value.current, err.value.requested) == (6, 4)
    with pytest.raises(InvalidInputTimeError):
        h.send(at=-1)
    h.close()
    with pytest.raises(ClosedHandleError):
        h.send(at=9)


def test_probe_follows_the_frontier() -> None:
    t = tracker()
    probe = progress.probe(t, Target("validate"))
    assert probe.less_equal(0)
    assert not probe.less_than(0)
    for w in (0, 1):
        t.apply(input_handle(t, "payments", w).advance_to(5))
    assert probe.frontier().elements == (5,)
    assert probe.less_than(6)
    assert not probe.less_equal(4)
    assert not probe.done()
    with pytest.raises(UnknownLocationError):
        progress.probe(t, Target("ghost"))


def test_blockers_describe_who_holds_an_epoch() -> None:
    t = tracker()
    t.apply(input_handle(t, "payments", 0).advance_to(8))
    (blocker,) = t.blockers("validate", 7)
    assert blocker.location == Source("payments")
    assert blocker.count == 1
    assert blocker.describe() == (
        "Source('payments', 0) holds 1 capabilities at 0, which can still reach "
        "Target('validate', 0) at 0"
    )
    with pytest.raises(UnknownNodeError):
        t.ready("ghost", 0)


def test_closed_epochs_are_forgotten() -> None:
    t = tracker()
    handles = [input_handle(t, "payments", w) for w in (0, 1)]
    for epoch in range(1, 200):
        for h in handles:
            t.apply(h.send())
            t.apply(h.advance_to(epoch))
        t.apply(t.stage_batch("validate", epoch - 1))
    # Only what is open is kept: the two capabilities at 199.
    assert t.pointstamps() == [(Source("payments"), 199, 2)]
    assert t._implications[t.graph.index[Target("validate")]]._counts == {199: 1}
