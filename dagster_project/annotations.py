"""The functions Dagster calls (assets, ops, sensors), with their annotations resolved.

Dagster recognises a context, a config and resources by their parameters' annotation classes,
and under ``from __future__ import annotations`` those are strings until resolved.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, get_type_hints

F = TypeVar("F", bound=Callable[..., Any])


def resolved(fn: F) -> F:
    """``fn`` with its annotations resolved to classes, for Dagster to read."""
    fn.__annotations__ = get_type_hints(fn)
    return fn
