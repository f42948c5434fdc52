"""Waiting in tests for something observable to hold, with a deadline and a sentence saying what
did not happen, instead of sleeping a fixed time and hoping."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

EVERY = 0.05
"""Seconds between two looks, by default: short next to what tests wait for (a process to start
or end, a file to appear), long enough that looking costs nothing."""


def wait_until(
    predicate: Callable[[], T],
    timeout: float,
    what: str,
    *,
    every: float = EVERY,
    detail: Callable[[], str] | None = None,
    check: Callable[[], None] | None = None,
) -> T:
    """Call ``predicate`` every ``every`` seconds until it returns something true, and return
    that; after ``timeout`` seconds fail with ``AssertionError`` saying that ``what`` did not
    happen (followed by ``detail()``, such as a log's tail, when given). An exception the
    predicate raises ends the wait at once, and so does one ``check()`` raises: it is called
    before each look, to fail at once on what makes waiting pointless (a server that exited, a
    failed run).

    >>> wait_until(lambda: 42, 1.0, "the answer")
    42
    >>> wait_until(lambda: [], 0.1, "a non-empty list", every=0.02)
    Traceback (most recent call last):
    ...
    AssertionError: a non-empty list: not within 0.1 s
    """
    looked = predicate if check is None else _checked(predicate, check)
    found = _poll(looked, timeout, every)
    if not found:
        said = f"{what}: not within {timeout:g} s"
        raise AssertionError(f"{said}\n{detail()}" if detail is not None else said)
    return found


def within(predicate: Callable[[], object], timeout: float, *, every: float = EVERY) -> bool:
    """Whether ``predicate`` holds within ``timeout`` seconds (looked at every ``every``), for
    callers that go on either way (for instance, to kill what did not end by itself).

    >>> within(lambda: True, 0.0)
    True
    >>> within(lambda: False, 0.05, every=0.01)
    False
    """
    return bool(_poll(predicate, timeout, every))


def _checked(predicate: Callable[[], T], check: Callable[[], None]) -> Callable[[], T]:
    def look() -> T:
        check()
        return predicate()

    return look


def _poll(predicate: Callable[[], T], timeout: float, every: float) -> T:
    """The first true value of ``predicate`` within ``timeout`` seconds, else its last value."""
    deadline = time.monotonic() + timeout
    while True:
        found = predicate()
        if found or time.monotonic() >= deadline:
            return found
        time.sleep(min(every, max(deadline - time.monotonic(), 0.0)))
