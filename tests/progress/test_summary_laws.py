"""Each law stated in ``progress.summary``, as a property over epochs and product times."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from progress import (
    MAX_EPOCH,
    Delay,
    InvalidSummaryError,
    Product,
    ProductSummary,
    identity_of,
    less_equal,
)
from tests.progress.strategies import delays, epochs, product_summaries, products

pytestmark = pytest.mark.unit

over_epochs = st.tuples(delays, delays, delays, epochs, epochs)
over_products = st.tuples(
    product_summaries, product_summaries, product_summaries, products, products
)
cases = st.one_of(over_epochs, over_products)


def le_or_none(a: object, b: object) -> bool:
    """The partial order extended with None above every time."""
    if b is None:
        return True
    return a is not None and less_equal(a, b)  # type: ignore[arg-type]


def then(s: object, t: object) -> object:
    return None if t is None else s.results_in(t)  # type: ignore[attr-defined]


@given(cases)
def test_identity(case: tuple[object, ...]) -> None:
    s, _, _, t, _ = case
    identity = identity_of(t)  # type: ignore[arg-type]
    assert identity.results_in(t) == t  # type: ignore[arg-type]
    assert s.followed_by(identity) == s  # type: ignore[attr-defined]
    assert identity.followed_by(s) == s  # type: ignore[arg-type]
    assert not identity.advances()


@given(cases)
def test_no_travel_back(case: tuple[object, ...]) -> None:
    s, _, _, t, _ = case
    result = s.results_in(t)  # type: ignore[attr-defined]
    assert result is None or less_equal(t, result)  # type: ignore[arg-type]
    if s.advances() and result is not None:  # type: ignore[attr-defined]
        assert result != t


@given(cases)
def test_monotone_in_time(case: tuple[object, ...]) -> None:
    s, _, _, t1, t2 = case
    if less_equal(t1, t2):  # type: ignore[arg-type]
        assert le_or_none(s.results_in(t1), s.results_in(t2))  # type: ignore[attr-defined]


@given(cases)
def test_monotone_in_summary(case: tuple[object, ...]) -> None:
    s1, s2, _, t, _ = case
    if s1.less_equal(s2):  # type: ignore[attr-defined]
        assert le_or_none(s1.results_in(t), s2.results_in(t))  # type: ignore[attr-defined]
    assert s1.less_than(s2) == (s1.less_equal(s2) and s1 != s2)  # type: ignore[attr-defined]


@given(cases)
def test_composition(case: tuple[object, ...]) -> None:
    s, r, _, t, _ = case
    composed = s.followed_by(r)  # type: ignore[attr-defined]
    sequential = then(r, s.results_in(t))  # type: ignore[attr-defined]
    if composed is None:
        assert sequential is None
    else:
        assert composed.results_in(t) == sequential


@given(cases)
def test_associativity(case: tuple[object, ...]) -> None:
    a, b, c, _, _ = case
    ab = a.followed_by(b)  # type: ignore[attr-defined]
    bc = b.followed_by(c)  # type: ignore[attr-defined]
    left = None if ab is None else ab.followed_by(c)
    right = None if bc is None else a.followed_by(bc)  # type: ignore[attr-defined]
    assert left == right


def test_results_past_the_largest_epoch_are_none() -> None:
    assert Delay(1).results_in(MAX_EPOCH) is None
    assert Delay(MAX_EPOCH).followed_by(Delay(1)) is None
    assert ProductSummary(0, 1).results_in(Product(0, MAX_EPOCH)) is None
    assert ProductSummary(MAX_EPOCH, 0).followed_by(ProductSummary(1, 0)) is None


@pytest.mark.parametrize("bad", [-1, 1.5, MAX_EPOCH + 1, True])
def test_invalid_delays_are_refused(bad: object) -> None:
    with pytest.raises(InvalidSummaryError):
        Delay(bad)  # type: ignore[arg-type]


def test_product_summary_takes_ints_or_summaries() -> None:
    assert ProductSummary(0, 1) == ProductSummary(Delay(0), Delay(1))
    assert str(ProductSummary(0, 1)) == "ProductSummary(0, 1)"
    with pytest.raises(InvalidSummaryError):
        ProductSummary("a", 1)  # type: ignore[arg-type]
