"""The partial order on times: its laws, for epochs and product times."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from progress import MAX_EPOCH, InvalidTimeError, Product, less_equal, less_than
from progress.timestamp import validate_time
from tests.progress.strategies import nested_products, products, small_epochs

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
