"""The steps of one scenario shared by the tests of a module: each runs once, and a step that
failed fails, by name, every later test that needs it (instead of running it again on a world it
left half done)."""

from __future__ import annotations

from collections.abc import Callable

import pytest


class Steps:
    """The steps of one scenario: each runs once, by the first test that needs it; a step that
    failed fails every later test that needs it, naming it, instead of running it again."""

    def __init__(self) -> None:
        self._done: dict[str, BaseException | None] = {}

    def once(self, name: str, step: Callable[[], None]) -> None:
        if name in self._done:
            failed = self._done[name]
            if failed is not None:
                pytest.fail(f"the step {name!r} failed before: {failed!r}", pytrace=False)
            return
        try:
            step()
        except BaseException as err:
            self._done[name] = err
            raise
        self._done[name] = None

    def after(self, name: str) -> None:
        """Fail now, naming it, unless step ``name`` ran and did not fail (a later step's
        test, when the steps are the tests of a module run in order)."""
        if name not in self._done:
            pytest.fail(f"the step {name!r} has not run", pytrace=False)
        self.once(name, lambda: None)

    def ran(self, name: str) -> bool:
        """Whether the step was run (whether or not it failed)."""
        return name in self._done
