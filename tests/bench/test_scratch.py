"""A bench's temporary directory lets go of the ledgers and state stores kept attached in it
before it is removed (nothing is written into it while it goes)."""

from __future__ import annotations

import pytest

from progress.ledger import Ledger
from state_store.keyed import KeyedState
from tests.bench.scripts import load
from tests.progress.ledger.scenario import bank_graph

pytestmark = pytest.mark.ledger


def test_the_files_kept_attached_in_a_scratch_directory_are_let_go_before_it_goes() -> None:
    scratch = load("scratch").scratch
    with scratch("bench-test-") as root:
        ledger = Ledger(root / "ledger.duckdb", linger=60)
        ledger.register("bank", bank_graph())
        state = KeyedState(root / "state.duckdb", linger=60)
        with state.connect():
            pass
        assert ledger._sessions._file._held is not None  # kept attached, for a minute
        assert state._file._held is not None
    assert not root.exists()
    assert ledger._sessions._file._held is None
    assert state._file._held is None
