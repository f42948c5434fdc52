"""The replay protocol's rules, event by event."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from progress.capture import (
    Event,
    Messages,
    Progress,
    Revision,
    Rule,
    StreamChecker,
    StreamError,
    replayed_frontier,
)

pytestmark = pytest.mark.unit


def epochs(n: int, late: bool = False) -> list[Event]:
    """A stream of ``n`` epochs, each a message then its release."""
    out: list[Event] = []
    for t in range(n):
        out.append(Messages(t))
        if late:
            out.append(Messages(t))
        out.append(Progress(((t + 1, 1), (t, -1))))
    return out


def refused(events: list[Event]) -> StreamError:
    checker = StreamChecker("s")
    with pytest.raises(StreamError) as err:
        checker.check_all(events)
    return err.value


def test_a_stream_starts_with_count_one_at_the_minimum() -> None:
    checker = StreamChecker("s")
    assert checker.counts() == [(0, 1)]
    checker.check_all(epochs(3, late=True))
    assert checker.frontier.elements == (3,)
    checker.check(Progress(((3, -1),)))
    assert checker.frontier.is_empty()


def test_each_rule_is_named_with_the_event_index() -> None:
    err = refused([Progress(((2, 1), (0, -1))), Messages(1)])
    assert (err.index, err.rule) == (1, Rule.MESSAGE_WITHOUT_CAPABILITY)
    assert "event 1" in str(err)
    assert "'s'" in str(err)
    assert "nothing of it" in str(err)
    assert refused([Progress(((0, -1),)), Progress(((3, 1),))]).rule is Rule.COUNT_FROM_NOTHING
    assert refused([Progress(((0, -2), (1, 1)))]).rule is Rule.NEGATIVE_COUNT
    assert refused([Messages(0), Revision(0)]).rule is Rule.REVISION_OF_OPEN_TIME
    assert refused([Progress(((2, 1), (0, -1))), Revision(1)]).rule is (
        Rule.REVISION_WITHOUT_MESSAGE
    )
    assert refused([Messages(-1)]).rule is Rule.BAD_TIME
    # the last capability released before a message that needs it
    assert refused([Messages(0), Progress(((0, -1),)), Messages(0)]).index == 2


def test_a_refused_event_leaves_the_counts_as_they_were() -> None:
    checker = StreamChecker("s")
    with pytest.raises(StreamError):
        checker.check(Progress(((5, 1), (0, -2))))
    assert checker.counts() == [(0, 1)]
    assert checker.index == 0


def test_a_revision_of_a_released_time_is_accepted() -> None:
    checker = StreamChecker("s")
    checker.check_all([*epochs(2), Revision(0)])
    assert checker.index == 5


def test_the_replayed_frontier_is_the_least_of_the_streams() -> None:
    a, b = StreamChecker("a"), StreamChecker("b")
    a.check_all(epochs(4))
    b.check_all(epochs(2))
    assert replayed_frontier([a, b]).elements == (2,)
    b.check_all([Messages(2), Progress(((2, -1),))])
    assert replayed_frontier([a, b]).elements == (4,)


@st.composite
def moved(draw: st.DrawFn) -> list[Event]:
    """A valid stream with messages moved earlier and progress later, as the protocol allows:
    a message may move before any progress event, a progress event after any message."""
    events = epochs(draw(st.integers(1, 6)), late=draw(st.booleans()))
    for _ in range(draw(st.integers(0, 8))):
        i = draw(st.integers(0, len(events) - 2))
        a, b = events[i], events[i + 1]
        if isinstance(a, Progress) and isinstance(b, Messages):
            events[i], events[i + 1] = b, a
    return events


@given(moved())
def test_messages_earlier_and_progress_later_are_accepted(events: list[Event]) -> None:
    StreamChecker("s").check_all(events)


@given(moved(), st.data())
def test_a_message_moved_past_its_release_is_refused(
    events: list[Event], data: st.DataObject
) -> None:
    released = [i for i, e in enumerate(events) if isinstance(e, Progress)]
    i = data.draw(st.sampled_from(released))
    change = events[i]
    assert isinstance(change, Progress)
    gone = min(t for t, d in change.changes if d < 0)
    late = [*events[: i + 1], Messages(gone), *events[i + 1 :]]
    assert refused(late).rule is Rule.MESSAGE_WITHOUT_CAPABILITY
