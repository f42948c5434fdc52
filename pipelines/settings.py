"""Where epochgate keeps its state, from flags, then the environment, then defaults.

``EPOCHGATE_HOME`` (default ``.epochgate``) is the state directory; ``EPOCHGATE_LEDGER``
overrides the ledger file (default ``$EPOCHGATE_HOME/ledger.duckdb``) and ``EPOCHGATE_DATA``
the data directory (default ``$EPOCHGATE_HOME/data``).
"""

from __future__ import annotations

import os
from pathlib import Path

HOME_ENV = "EPOCHGATE_HOME"
LEDGER_ENV = "EPOCHGATE_LEDGER"
DATA_ENV = "EPOCHGATE_DATA"


def state_dir() -> Path:
    return Path(os.environ.get(HOME_ENV, ".epochgate"))


def ledger_path(flag: str | None = None) -> Path:
    """The ledger file: ``--ledger``, else ``$EPOCHGATE_LEDGER``, else under the state dir."""
    if flag:
        return Path(flag)
    if os.environ.get(LEDGER_ENV):
        return Path(os.environ[LEDGER_ENV])
    return state_dir() / "ledger.duckdb"


def data_path(flag: str | None = None) -> Path:
    """Where messages are written: ``--data``, else ``$EPOCHGATE_DATA``, else the state dir's."""
    if flag:
        return Path(flag)
    if os.environ.get(DATA_ENV):
        return Path(os.environ[DATA_ENV])
    return state_dir() / "data"
