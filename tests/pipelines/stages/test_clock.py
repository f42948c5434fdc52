"""The epoch clock: epochs open on a cron schedule, last a fixed length, and place any time."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyspark.sql.types import LongType, StructField, StructType

from pipelines.errors import ClockError, PipelineDefinitionError
from pipelines.stages.clock import AfterEpochEnd, DoneMarkers, EpochClock, Explicit
from pipelines.stages.pipeline import Pipeline

pytestmark = pytest.mark.unit

ORIGIN = datetime(2026, 11, 2, 0, 0, tzinfo=UTC)
HOURLY = EpochClock("0 * * * *", timedelta(hours=1), ORIGIN)
BERLIN = ZoneInfo("Europe/Berlin")
WORKDAYS = EpochClock(
    "0 9 * * 1-5", timedelta(hours=8), datetime(2026, 11, 20, 9, 0, tzinfo=BERLIN)
)
"""Friday 20 November 2026 is epoch 0; the next workday, Monday the 23rd, epoch 1."""
SCHEMA = StructType([StructField("n", LongType())])


def test_hourly_epochs_open_and_end_on_the_hour() -> None:
    assert HOURLY.opens(0) == ORIGIN
    assert HOURLY.opens(25) == datetime(2026, 11, 3, 1, 0, tzinfo=UTC)
    assert HOURLY.ends(25) == datetime(2026, 11, 3, 2, 0, tzinfo=UTC)
    assert HOURLY.opened(ORIGIN - timedelta(seconds=1)) == 0
    assert HOURLY.opened(ORIGIN) == 1
    assert HOURLY.opened(datetime(2026, 11, 3, 1, 0, tzinfo=UTC)) == 26


def test_workday_epochs_skip_the_weekend_and_leave_gaps_between_windows() -> None:
    assert WORKDAYS.opens(1) == datetime(2026, 11, 23, 9, 0, tzinfo=BERLIN)
    assert WORKDAYS.epoch_of(datetime(2026, 11, 20, 16, 59, tzinfo=BERLIN)) == 0
    assert WORKDAYS.epoch_of(datetime(2026, 11, 20, 17, 0, tzinfo=BERLIN)) is None  # after work
    assert WORKDAYS.epoch_of(datetime(2026, 11, 21, 12, 0, tzinfo=BERLIN)) is None  # Saturday
    assert WORKDAYS.epoch_of(datetime(2026, 11, 23, 10, 0, tzinfo=BERLIN)) == 1
    assert WORKDAYS.epoch_of(datetime(2026, 11, 20, 8, 0, tzinfo=BERLIN)) is None  # before 0


@given(st.integers(min_value=0, max_value=5000), st.integers(min_value=1, max_value=3599))
def test_the_epoch_of_a_time_is_the_one_whose_window_holds_it(epoch: int, second: int) -> None:
    opens = HOURLY.opens(epoch)
    assert HOURLY.opened(opens) == epoch + 1
    assert HOURLY.opened(opens - timedelta(microseconds=1)) == epoch
    assert HOURLY.epoch_of(opens + timedelta(seconds=second)) == epoch


@pytest.mark.parametrize(
    ("cron", "length", "origin", "says"),
    [
        ("0 * * * *", timedelta(hours=1), datetime(2026, 11, 2), "has no time zone"),
        ("0 * * * *", timedelta(0), ORIGIN, "length must be positive"),
        ("61 * * * *", timedelta(hours=1), ORIGIN, "cron '61 * * * *' is not usable"),
        ("30 * * * *", timedelta(hours=1), ORIGIN, "is not a time cron '30 * * * *' matches"),
    ],
)
def test_a_clock_that_cannot_work_is_refused_with_the_reason(
    cron: str, length: timedelta, origin: datetime, says: str
) -> None:
    with pytest.raises(ClockError, match=re.escape(says)):
        EpochClock(cron, length, origin)


def test_times_without_a_zone_and_negative_epochs_are_refused() -> None:
    with pytest.raises(ClockError, match="has no time zone"):
        HOURLY.opened(datetime(2026, 11, 2))
    with pytest.raises(ClockError, match="is not an epoch"):
        HOURLY.opens(-1)
    with pytest.raises(ClockError, match="grace period cannot be negative"):
        AfterEpochEnd(timedelta(minutes=-1))


def test_close_rules_are_part_of_the_source() -> None:
    p = Pipeline("feeds", clock=HOURLY)
    p.source("events", schema=SCHEMA, close=AfterEpochEnd(timedelta(minutes=10)))
    p.source("files", schema=SCHEMA, workers=2, close=DoneMarkers("/landing/files"))
    p.source("manual", schema=SCHEMA)
    assert p.close_rule("events") == AfterEpochEnd(timedelta(minutes=10))
    assert p.close_rule("manual") == Explicit()
    marker = DoneMarkers("/landing/files").marker(3, 1)
    assert str(marker) == "/landing/files/epoch=3/worker=1.done"

    unscheduled = Pipeline("feeds")
    with pytest.raises(PipelineDefinitionError, match="needs an epoch clock"):
        unscheduled.source("events", schema=SCHEMA, close=AfterEpochEnd())
    with pytest.raises(PipelineDefinitionError, match="close must be Explicit"):
        unscheduled.source("events", schema=SCHEMA, close="hourly")  # type: ignore[arg-type]
