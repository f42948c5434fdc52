"""Path summaries: what must happen to a time along a path through the graph.

A summary ``s`` maps a time to the least time it can result in at the path's end
(``s.results_in(t)``, ``None`` past the largest time) and composes with the summary of a
following path (``s.followed_by(r)``). Summaries are partially ordered like times.

Laws (each a hypothesis property in ``tests/progress/test_summary_laws.py``):

* identity: ``identity_of(t).results_in(t) == t``; ``s.followed_by(identity) == s`` and
  ``identity.followed_by(s) == s``;
* no travel back: ``s.results_in(t)`` is ``None`` or ``less_equal(t, s.results_in(t))``;
* monotone in the time: ``less_equal(t1, t2)`` implies ``s.results_in(t1) <= s.results_in(t2)``
  in the partial order, where ``None`` is above every time;
* monotone in the summary: ``s1.less_equal(s2)`` implies ``s1.results_in(t) <= s2.results_in(t)``;
* composition: ``s.followed_by(r).results_in(t) == r.results_in(s.results_in(t))`` (``None``
  propagating), and ``s.followed_by(r)`` is ``None`` only when that is ``None`` for every ``t``;
* associativity: ``(a.followed_by(b)).followed_by(c) == a.followed_by(b.followed_by(c))``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

from progress.errors import InvalidSummaryError
from progress.timestamp import MAX_EPOCH, Product, Time


@dataclass(frozen=True, slots=True, order=True)
class Delay:
    """The summary of a path over epochs that adds ``k`` epochs. ``Delay(0)`` is the identity.

    >>> Delay(2).results_in(5), Delay(2).followed_by(Delay(3))
    (7, Delay(k=5))
    """

    k: int

    def __post_init__(self) -> None:
        if type(self.k) is not int or not 0 <= self.k <= MAX_EPOCH:
            raise InvalidSummaryError(self, f"a delay is an int in 0 .. {MAX_EPOCH}")

    def results_in(self, t: int) -> int | None:
        r = t + self.k
        return r if r <= MAX_EPOCH else None

    def followed_by(self, other: Delay) -> Delay | None:
        k = self.k + other.k
        return Delay(k) if k <= MAX_EPOCH else None

    def less_equal(self, other: Delay) -> bool:
        return self.k <= other.k

    def less_than(self, other: Delay) -> bool:
        return self.k < other.k

    def advances(self) -> bool:
        """True when every time strictly advances along this summary."""
        return self.k > 0

    def __str__(self) -> str:
        return f"Delay({self.k})"


@dataclass(frozen=True, slots=True, order=True)
class ProductSummary:
    """The summary of a path over ``Product`` times: ``outer`` and ``inner`` act componentwise.

    ``ProductSummary(0, 1)`` is the feedback summary of an iterative scope (one more round);
    ``ProductSummary(0, 0)`` is the identity. Integer components stand for ``Delay``.

    >>> ProductSummary(0, 1).results_in(Product(3, 4))
    Product(outer=3, inner=5)
    """

    outer: PathSummary
    inner: PathSummary

    def __post_init__(self) -> None:
        for name in ("outer", "inner"):
            value = getattr(self, name)
            if type(value) is int:
                object.__setattr__(self, name, Delay(value))
            elif not isinstance(value, Delay | ProductSummary):
                raise InvalidSummaryError(self, f"{name} must be an int, Delay or ProductSummary")

    def results_in(self, t: Product) -> Product | None:
        outer = self.outer.results_in(t.outer)  # type: ignore[arg-type]
        if outer is None:
            return None
        inner = self.inner.results_in(t.inner)  # type: ignore[arg-type]
        if inner is None:
            return None
        return Product(outer, inner)

    def followed_by(self, other: ProductSummary) -> ProductSummary | None:
        outer = self.outer.followed_by(other.outer)  # type: ignore[arg-type]
        if outer is None:
            return None
        inner = self.inner.followed_by(other.inner)  # type: ignore[arg-type]
        if inner is None:
            return None
        return ProductSummary(outer, inner)

    def less_equal(self, other: ProductSummary) -> bool:
        return self.outer.less_equal(other.outer) and self.inner.less_equal(  # type: ignore[arg-type]
            other.inner  # type: ignore[arg-type]
        )

    def less_than(self, other: ProductSummary) -> bool:
        return self != other and self.less_equal(other)

    def advances(self) -> bool:
        """True when every time strictly advances along this summary."""
        return self.outer.advances() or self.inner.advances()

    def __str__(self) -> str:
        return f"ProductSummary({_plain(self.outer)}, {_plain(self.inner)})"


PathSummary: TypeAlias = Delay | ProductSummary
"""A path summary over epochs or over product times."""


def identity_of(t: Time) -> PathSummary:
    """The identity summary for times shaped like ``t``.

    >>> identity_of(0), identity_of(Product(0, 0))
    (Delay(k=0), ProductSummary(outer=Delay(k=0), inner=Delay(k=0)))
    """
    if isinstance(t, Product):
        return ProductSummary(identity_of(t.outer), identity_of(t.inner))
    return Delay(0)


def fits(summary: PathSummary, t: Time) -> bool:
    """True when ``summary`` applies to times shaped like ``t``."""
    if isinstance(t, Product):
        return (
            isinstance(summary, ProductSummary)
            and fits(summary.outer, t.outer)
            and fits(summary.inner, t.inner)
        )
    return isinstance(summary, Delay)


def _plain(s: PathSummary) -> str:
    return str(s.k) if isinstance(s, Delay) else str(s)
