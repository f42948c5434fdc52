"""Where epochgate keeps its state: flags, then the environment, then defaults, made absolute.

``EPOCHGATE_HOME`` (default ``.epochgate``) is the home directory; ``EPOCHGATE_LEDGER``
overrides the ledger file (default ``$EPOCHGATE_HOME/ledger.duckdb``) and ``EPOCHGATE_DATA``
the data directory (default ``$EPOCHGATE_HOME/data``). Every path is made absolute by one rule,
``absolute`` (``~`` expanded, a relative path taken from the working directory of the command),
when it is read, so the command line, the Dagster resources, the Spark Connect server's files
and the demos agree on one place. A command resolves its ``Settings`` once, before it does
anything else.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

HOME_ENV = "EPOCHGATE_HOME"
LEDGER_ENV = "EPOCHGATE_LEDGER"
DATA_ENV = "EPOCHGATE_DATA"

DEFAULT_HOME = ".epochgate"
LEDGER_FILE = "ledger.duckdb"
"""The ledger's file name in the home."""
DATA_DIR = "data"
"""The data directory's name in the home (and beside a ledger that has no other)."""
STATE_FILE = "state.duckdb"
"""The state store's file name, beside the ledger unless another store is given."""
CONNECT_DIR = "connect"
"""Where each local Spark Connect server keeps its pid file and log: ``connect/PORT/``."""
DAGSTER_DIR = "dagster"
"""The Dagster instance of ``make demo`` and ``make ui`` (their ``DAGSTER_HOME``)."""
DEMO_DIR = "demo"
"""The demos' inputs, ledger, data and state (replaced by each demo)."""
DEMO_DATA_DIR = "demo-data"
"""Where ``epochgate demo-data`` writes by default."""


def absolute(path: str | os.PathLike[str]) -> Path:
    """``path`` with ``~`` expanded, made absolute against the working directory: the one rule
    for every path epochgate reads from a flag, a variable or a resource's configuration."""
    return Path(path).expanduser().resolve()


def state_dir() -> Path:
    """The home: ``$EPOCHGATE_HOME``, else ``.epochgate`` (absolute)."""
    return absolute(os.environ.get(HOME_ENV) or DEFAULT_HOME)


def ledger_path(flag: str | os.PathLike[str] | None = None) -> Path:
    """The ledger file: ``--ledger``, else ``$EPOCHGATE_LEDGER``, else in the home."""
    if flag:
        return absolute(flag)
    if os.environ.get(LEDGER_ENV):
        return absolute(os.environ[LEDGER_ENV])
    return state_dir() / LEDGER_FILE


def data_path(flag: str | os.PathLike[str] | None = None) -> Path:
    """Where messages are written: ``--data``, else ``$EPOCHGATE_DATA``, else in the home."""
    if flag:
        return absolute(flag)
    if os.environ.get(DATA_ENV):
        return absolute(os.environ[DATA_ENV])
    return state_dir() / DATA_DIR


def state_path(ledger: Path) -> Path:
    """The state store that belongs to the ledger file ``ledger``: beside it."""
    return ledger.with_name(STATE_FILE)


@dataclass(frozen=True)
class Settings:
    """The places one command uses, all absolute, read once."""

    home: Path
    ledger: Path
    data: Path

    @classmethod
    def resolve(
        cls,
        ledger: str | os.PathLike[str] | None = None,
        data: str | os.PathLike[str] | None = None,
    ) -> Settings:
        """From flags (``None`` when not given), then the environment, then the defaults."""
        return cls(state_dir(), ledger_path(ledger), data_path(data))

    @property
    def state(self) -> Path:
        """The state store of stateful stages, beside the ledger."""
        return state_path(self.ledger)
