"""Logical times: epochs and `Product` times, their partial order, and one codec per form.

A time is either an ``int`` epoch in ``0 .. MAX_EPOCH`` (stored as a DuckDB ``BIGINT``) or a
``Product(outer, inner)`` whose components are themselves times. Two functions give the partial
order for both kinds, ``less_equal`` and ``less_than``; sorting (``<`` on ``Product``) is a
separate, total order, lexicographic and compatible with the partial order, used only where an
order of processing is needed (heaps, stable listings).

Outside the process a time takes a few forms, each written here once: JSON-able data, the
ledger's two BIGINT columns, words for people, a short text form and its parser, a data
directory segment, and a Dagster metadata value.

Laws (tested in ``tests/progress/test_timestamp_laws.py``):

* ``less_equal`` is reflexive, antisymmetric and transitive;
* ``less_than(a, b)`` iff ``less_equal(a, b) and a != b``;
* ``less_equal(a, b)`` implies ``a <= b`` in the total (sorting) order;
* each decode inverts its encode, for every time the form holds:
  ``time_from_data(time_to_data(t)) == t``, ``time_from_columns(*time_to_columns(t)) == t``,
  ``parse_time(format_time(t)) == t``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeAlias

from progress.errors import InvalidTimeError

MAX_EPOCH = 2**63 - 1
"""The largest epoch: the largest value a DuckDB ``BIGINT`` holds."""


@dataclass(frozen=True, slots=True, order=True)
class Product:
    """A time inside an iterative scope: ``outer`` is the enclosing time, ``inner`` the round.

    ``Product`` is ordered componentwise (``Product(1, 5)`` and ``Product(2, 0)`` are
    incomparable) by ``less_equal``; its ``<`` sorts lexicographically.
    """

    outer: Time
    inner: Time

    def less_equal(self, other: Product) -> bool:
        """True when every component of ``self`` is less than or equal to ``other``'s."""
        return less_equal(self.outer, other.outer) and less_equal(self.inner, other.inner)

    def less_than(self, other: Product) -> bool:
        """True when ``self`` is ``less_equal`` to ``other`` and differs from it."""
        return self != other and self.less_equal(other)

    def __str__(self) -> str:
        return f"({self.outer}, {self.inner})"


Time: TypeAlias = int | Product
"""A logical time: an epoch or a product time."""


def less_equal(a: Time, b: Time) -> bool:
    """The partial order on times.

    >>> less_equal(3, 7), less_equal(Product(1, 5), Product(2, 0))
    (True, False)
    """
    if type(a) is int:
        # Epochs are totally ordered; this is the one place `<=` on them means the partial order.
        return a <= b  # type: ignore[operator]
    return a.less_equal(b)  # type: ignore[union-attr,arg-type]


def less_than(a: Time, b: Time) -> bool:
    """The strict partial order on times.

    >>> less_than(3, 3), less_than(Product(1, 0), Product(1, 2))
    (False, True)
    """
    if type(a) is int:
        return a < b  # type: ignore[operator]
    return a.less_than(b)  # type: ignore[union-attr,arg-type]


def minimum_like(t: Time) -> Time:
    """The least time of the same shape as ``t``: ``0`` or a ``Product`` of least components.

    >>> minimum_like(Product(4, 2))
    Product(outer=0, inner=0)
    """
    if isinstance(t, Product):
        return Product(minimum_like(t.outer), minimum_like(t.inner))
    return 0


def validate_time(t: object, shape: Time) -> Time:
    """Return ``t`` if it is a time of the same shape as ``shape``; raise ``InvalidTimeError``.

    >>> validate_time(5, 0)
    5
    """
    if isinstance(shape, Product):
        if not isinstance(t, Product):
            raise InvalidTimeError(t, f"expected a Product time like {shape}")
        validate_time(t.outer, shape.outer)
        validate_time(t.inner, shape.inner)
        return t
    if type(t) is not int:
        raise InvalidTimeError(t, "expected an int epoch")
    if not 0 <= t <= MAX_EPOCH:
        raise InvalidTimeError(t, f"epochs lie in 0 .. {MAX_EPOCH}")
    return t


# -- codecs: one per form a time takes outside the process -----------------------------------


def time_to_data(t: Time) -> Any:
    """A time as JSON-able data (graph specs, ``status --json``): an epoch stays an int, a
    ``Product`` becomes a list of its two components.

    >>> time_to_data(7), time_to_data(Product(1, 2)), time_to_data(Product(Product(1, 2), 3))
    (7, [1, 2], [[1, 2], 3])
    """
    return [time_to_data(t.outer), time_to_data(t.inner)] if isinstance(t, Product) else t


def time_from_data(data: Any) -> Time:
    """The time that ``time_to_data`` gave ``data`` for.

    >>> time_from_data(7), time_from_data([1, 2])
    (7, Product(outer=1, inner=2))
    """
    if isinstance(data, list):
        return Product(time_from_data(data[0]), time_from_data(data[1]))
    return data  # type: ignore[no-any-return]


def time_to_columns(t: Time) -> tuple[int, int]:
    """A time as the ledger's two BIGINT columns: an epoch ``t`` as ``(t, -1)``, a
    ``Product(o, i)`` of two epochs as ``(o, i)``; deeper products are refused.

    >>> time_to_columns(7), time_to_columns(Product(7, 2))
    ((7, -1), (7, 2))
    """
    if isinstance(t, Product):
        if type(t.outer) is not int or type(t.inner) is not int:
            raise InvalidTimeError(t, "the ledger stores epochs and products of two epochs")
        return (t.outer, t.inner)
    return (t, -1)


def time_from_columns(t0: int, t1: int) -> Time:
    """The time stored as ``(t0, t1)``.

    >>> time_from_columns(7, -1), time_from_columns(7, 2)
    (7, Product(outer=7, inner=2))
    """
    return t0 if t1 < 0 else Product(t0, t1)


def describe_time(t: Time) -> str:
    """A time in words, for sentences shown to people.

    >>> describe_time(7), describe_time(Product(7, 2))
    ('epoch 7', 'epoch 7, round 2')
    """
    if isinstance(t, Product):
        return f"epoch {t.outer}, round {t.inner}"
    return f"epoch {t}"


def format_time(t: Time) -> str:
    """The short text form of a time (status tables): ``7`` or ``(7,2)``.

    >>> format_time(7), format_time(Product(7, 2))
    ('7', '(7,2)')
    """
    return f"({t.outer},{t.inner})" if isinstance(t, Product) else str(t)


def parse_time(text: str) -> Time:
    """A time from its short text form, ``7`` or ``7,2`` (epoch 7, round 2), with or without
    parentheses; raises ``InvalidTimeError`` for anything else.

    >>> parse_time("7"), parse_time("(7,2)"), parse_time("7, 2")
    (7, Product(outer=7, inner=2), Product(outer=7, inner=2))
    >>> parse_time("-1")
    Traceback (most recent call last):
    ...
    progress.errors.InvalidTimeError: invalid time '-1': expected 7, or 7,2 (epoch 7, round 2)
    """
    try:
        parts = [int(p) for p in text.strip("() ").split(",")]
    except ValueError:
        parts = []
    if len(parts) == 1 and parts[0] >= 0:
        return parts[0]
    if len(parts) == 2 and min(parts) >= 0:
        return Product(parts[0], parts[1])
    raise InvalidTimeError(text, "expected 7, or 7,2 (epoch 7, round 2)")


def time_directory(t: Time) -> str:
    """The data directory segment of a time, zero-padded so directories sort by time.

    >>> time_directory(7)
    'epoch=000000000007'
    >>> time_directory(Product(7, 2))
    'epoch=000000000007/round=000002'
    """
    if isinstance(t, Product):
        return f"epoch={t.outer:012d}/round={t.inner:06d}"
    return f"epoch={t:012d}"


def time_metadata(t: Time) -> int | str:
    """A time as a Dagster metadata JSON value: an epoch stays an int, a ``Product`` is its text.

    >>> time_metadata(7), time_metadata(Product(7, 2))
    (7, '(7, 2)')
    """
    return t if isinstance(t, int) else str(t)
