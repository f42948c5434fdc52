"""The partial order on times: its laws, for epochs and product times."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from progress import MAX_EPOCH, InvalidTimeError, Product, Time, less_equal, less_than
from progress.timestamp import (
    format_time,
    parse_time,
    time_directory,
    time_from_columns,
    time_from_data,
    time_to_columns,
    time_to_data,
    validate_time,
)
from tests.progress.strategies import epochs, nested_products, products, small_epochs

pytestmark = pytest.mark.unit

times = st.one_of(
    st.tuples(small_epochs, small_epochs, small_epochs),
    st.tuples(products, products, products),
    st.tuples(nested_products, nested_products, nested_products),
)


@given(times)
def test_partial_order_laws(abc: tuple[object, object, object]) -> None:
    a, b, c = abc
    assert less_equal(a, a)  # type: ignore[arg-type]
    if less_equal(a, b) and less_equal(b, a):  # type: ignore[arg-type]
        assert a == b
    if less_equal(a, b) and less_equal(b, c):  # type: ignore[arg-type]
        assert less_equal(a, c)  # type: ignore[arg-type]
    assert less_than(a, b) == (less_equal(a, b) and a != b)  # type: ignore[arg-type]
    if less_equal(a, b):  # type: ignore[arg-type]
        assert a <= b  # type: ignore[operator]  # the sorting order is compatible


def test_products_can_be_incomparable() -> None:
    a, b = Product(1, 5), Product(2, 0)
    assert not less_equal(a, b)
    assert not less_equal(b, a)
    assert a < b  # yet they sort
    assert a.less_equal(Product(1, 6))
    assert a.less_than(Product(1, 6))
    assert hash(Product(1, 5)) == hash(a)


@pytest.mark.parametrize(
    ("value", "shape"),
    [(-1, 0), (MAX_EPOCH + 1, 0), (True, 0), ("3", 0), (1.0, 0), (3, Product(0, 0))],
)
def test_invalid_times_are_refused(value: object, shape: object) -> None:
    with pytest.raises(InvalidTimeError) as info:
        validate_time(value, shape)  # type: ignore[arg-type]
    assert info.value.time == value or isinstance(value, int)


ledger_times = st.one_of(epochs, st.builds(Product, epochs, epochs))
"""The times the ledger stores: epochs and products of two epochs, up to ``MAX_EPOCH``."""
any_times = st.one_of(epochs, products, nested_products)


@given(any_times)
def test_data_decodes_to_the_time_it_encodes(t: Time) -> None:
    data = time_to_data(t)
    assert time_from_data(data) == t
    assert time_from_data(json.loads(json.dumps(data))) == t  # JSON-able, as the name says


@given(ledger_times)
def test_columns_decode_to_the_time_they_encode(t: Time) -> None:
    t0, t1 = time_to_columns(t)
    assert time_from_columns(t0, t1) == t
    assert all(-1 <= c <= MAX_EPOCH for c in (t0, t1))  # each fits a BIGINT


@given(ledger_times)
def test_text_parses_to_the_time_it_formats(t: Time) -> None:
    assert parse_time(format_time(t)) == t


@given(ledger_times, ledger_times)
def test_distinct_times_get_distinct_directories(a: Time, b: Time) -> None:
    assert (time_directory(a) == time_directory(b)) == (a == b)


@pytest.mark.parametrize("text", ["", "x", "-1", "1,-2", "1,2,3", "1.5", "(,)"])
def test_text_that_is_no_time_is_refused(text: str) -> None:
    with pytest.raises(InvalidTimeError) as info:
        parse_time(text)
    assert info.value.time == text


def test_the_ledger_refuses_deeper_products() -> None:
    with pytest.raises(InvalidTimeError):
        time_to_columns(Product(Product(1, 2), 3))
