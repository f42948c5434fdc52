"""Fixtures of the fault campaigns: the recorder their figures go to."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.faults.recorder import Recorder


@pytest.fixture(scope="session")
def recorder() -> Iterator[Recorder]:
    found = Recorder()
    yield found
    found.write()
