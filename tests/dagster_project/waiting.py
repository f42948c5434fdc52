"""Waiting in tests on something observable (a run's status, a process, a port), never for a
fixed time: ``wait_until`` polls a condition and fails the test, saying what did not happen,
when ``timeout`` passes first."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

POLL = 0.2
"""Seconds between two looks: short beside what the tests wait for (a run takes seconds)."""


def wait_until(
    done: Callable[[], bool],
    what: str,
    *,
    timeout: float,
    check: Callable[[], None] = lambda: None,
    context: Callable[[], str] = lambda: "",
    poll: float = POLL,
) -> None:
    """Return once ``done()`` holds; call ``check()`` before each look (it fails the test at
    once on what makes waiting pointless: a server that exited, a failed run), and fail with
    ``what`` and ``context()`` when ``timeout`` seconds pass first. ``poll``: seconds between
    two looks."""
    deadline = time.monotonic() + timeout
    while not done():
        check()
        if time.monotonic() > deadline:
            said = context()
            pytest.fail(f"{what}: not after {timeout:.0f}s" + (f"\n{said}" if said else ""))
        time.sleep(poll)
