"""Antichains and mutable antichains against brute force."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from progress import Antichain, ChangeBatch, MutableAntichain, Product, less_equal, less_than
from tests.progress.strategies import products, small_epochs

pytestmark = pytest.mark.unit

time_lists = st.one_of(st.lists(small_epochs, max_size=12), st.lists(products, max_size=12))


def brute_minimal(times: list[object]) -> set[object]:
    return {t for t in times if not any(less_than(u, t) for u in times)}  # type: ignore[arg-type]


@given(time_lists, st.randoms())
def test_antichain_is_minimal_and_order_free(times: list[object], rnd: object) -> None:
    a = Antichain(times)
    elements = a.elements
    for x in elements:
        for y in elements:
            assert x == y or not less_equal(x, y)  # type: ignore[arg-type]
    assert set(elements) == brute_minimal(times)
    for t in times:
        assert a.less_equal(t)
    shuffled = list(times)
    rnd.shuffle(shuffled)  # type: ignore[attr-defined]
    b = Antichain(shuffled)
    assert a == b
    assert hash(a) == hash(b)


@given(time_lists, st.one_of(small_epochs, products))
def test_antichain_queries_match_brute_force(times: list[object], t: object) -> None:
    a = Antichain(times)
    if type(t) is not type(times[0] if times else t):
        return
    assert a.less_equal(t) == any(less_equal(u, t) for u in times)  # type: ignore[arg-type]
    assert a.less_than(t) == any(less_than(u, t) for u in times)  # type: ignore[arg-type]


def test_antichain_insert_reports_change() -> None:
    a: Antichain[Product] = Antichain()
    assert a.insert(Product(1, 5))
    assert a.insert(Product(2, 0))
    assert not a.insert(Product(2, 1))
    assert a.insert(Product(0, 0))
    assert a.elements == (Product(0, 0),)


updates = st.one_of(
    st.lists(st.tuples(st.integers(0, 8), st.integers(-2, 2)), max_size=30),
    st.lists(
        st.tuples(st.builds(Product, st.integers(0, 3), st.integers(0, 3)), st.integers(-2, 2)),
        max_size=30,
    ),
)


@given(updates, st.integers(1, 5))
def test_mutable_antichain_frontier_matches_brute_force(
    changes: list[tuple[object, int]], chunk: int
) -> None:
    m: MutableAntichain[object] = MutableAntichain()
    counts: Counter[object] = Counter()
    frontier: set[object] = set()
    for start in range(0, len(changes), chunk):
        batch = changes[start : start + chunk]
        reported = m.update_iter(batch)
        for t, d in batch:
            counts[t] += d
        positive = [t for t, c in counts.items() if c > 0]
        expected = brute_minimal(positive)
        assert set(m.frontier().elements) == expected
        for t, sign in reported:
            assert sign in (1, -1)
            if sign > 0:
                frontier.add(t)
            else:
                frontier.remove(t)
        assert frontier == expected
        for t in counts:
            assert m.count_for(t) == counts[t]
        assert m.positive() == sorted((t, c) for t, c in counts.items() if c > 0)  # type: ignore[type-var]


@given(st.lists(st.tuples(st.sampled_from("abcde"), st.integers(-3, 3)), max_size=30))
def test_change_batch_compacts(updates_: list[tuple[str, int]]) -> None:
    batch: ChangeBatch[str] = ChangeBatch()
    batch.extend(updates_)
    total: Counter[str] = Counter()
    for k, d in updates_:
        total[k] += d
    expected = sorted((k, v) for k, v in total.items() if v)
    assert batch.items() == expected
    assert len(batch) == len(expected)
    assert batch.is_empty() == (not expected)
    assert batch.drain() == expected
    assert batch.is_empty()
