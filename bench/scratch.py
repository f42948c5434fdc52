"""A bench's temporary directory: removed at the end, once every ledger and state store kept
attached in it (they linger a moment after a use) is let go."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from progress.ledger import release_all


@contextmanager
def scratch(prefix: str) -> Iterator[Path]:
    """``tempfile.TemporaryDirectory(prefix=prefix)``, whose files are let go before it goes."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        try:
            yield Path(tmp)
        finally:
            release_all()
