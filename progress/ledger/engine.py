"""A DuckDB file used by one holder at a time, across processes: lock, attach, detach.

Starting a DuckDB engine costs about 15 ms (it builds its catalog of functions); attaching a
file to a running one costs well under 1 ms. So each holder keeps one in-memory engine for its
process and attaches the file only while it holds the file's lock. Detaching closes the file
(checkpointing it) just as closing a connection would, so the next process can open it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb

from progress.ledger.lock import LedgerLock

ALIAS = "attached"


class AttachedFile:
    """One DuckDB file; ``open()`` yields a connection whose current database is the file."""

    def __init__(self, path: Path, lock_timeout: float) -> None:
        self.path = path
        self.lock_timeout = lock_timeout
        self._engine: Any = None
        self._pid = 0

    @contextmanager
    def open(self) -> Iterator[Any]:
        """Hold the file's lock and have it attached (not reentrant: callers nest above it)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with LedgerLock(self.path.with_name(self.path.name + ".lock"), self.lock_timeout):
            con = self._attach()
            try:
                yield con
            finally:
                con.execute("USE memory")
                con.execute(f"DETACH DATABASE {ALIAS}")

    def _attach(self) -> Any:
        if self._engine is None or self._pid != os.getpid():  # never across a fork
            self._engine, self._pid = duckdb.connect(), os.getpid()
        con = self._engine
        con.execute("USE memory")
        con.execute(f"DETACH DATABASE IF EXISTS {ALIAS}")  # left by an interrupted use
        quoted = str(self.path).replace("'", "''")
        con.execute(f"ATTACH '{quoted}' AS {ALIAS}")
        con.execute(f"USE {ALIAS}")
        return con
