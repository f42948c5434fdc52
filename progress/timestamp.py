"""Logical times and their partial order: integer epochs and `Product` times of iterative scopes.

A time is either an ``int`` epoch in ``0 .. MAX_EPOCH`` (stored as a DuckDB ``BIGINT``) or a
``Product(outer, inner)`` whose components are themselves times. Two functions give the partial
order for both kinds, ``less_equal`` and ``less_than``; sorting (``<`` on ``Product``) is a
separate, total order, lexicographic and compatible with the partial order, used only where an
order of processing is needed (heaps, stable listings).

Laws (tested in ``tests/progress/test_timestamp_laws.py``):

* ``less_equal`` is reflexive, antisymmetric and transitive;
* ``less_than(a, b)`` iff ``less_equal(a, b) and a != b``;
* ``less_equal(a, b)`` implies ``a <= b`` in the total (sorting) order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

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
