"""The registry of pipelines: where each one's code is, and what verify looks at per pipeline."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from progress.ledger import Ledger, MessageEntry, Registration
from progress.ledger.schema import MIGRATIONS
from progress.spec import spec_hash, to_spec
from tests.progress.ledger.scenario import bank_graph, run_epoch

pytestmark = pytest.mark.ledger


def test_registering_records_where_the_code_is(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.duckdb")
    ledger.register("bank", bank_graph(), definition="bank")
    ledger.register("shop", bank_graph())  # from Python: nobody said
    assert ledger.registrations() == [Registration("bank", "bank"), Registration("shop", None)]
    assert ledger.registered("bank", bank_graph())
    assert ledger.registered("bank", bank_graph(), definition="bank")
    assert not ledger.registered("bank", bank_graph(), definition="mine:bank")
    assert not ledger.registered("bank", bank_graph(extra_stage=True))
    assert not ledger.registered("payroll", bank_graph())

    assert ledger.register("bank", bank_graph()) == "unchanged"  # keeps what it knew
    assert ledger.register("shop", bank_graph(), definition="shops:shop") == "unchanged"
    assert ledger.register("bank", bank_graph(extra_stage=True), definition="v2:bank") == (
        "extended"
    )
    assert ledger.registrations() == [
        Registration("bank", "v2:bank"),
        Registration("shop", "shops:shop"),
    ]


def test_a_registration_that_rolls_back_leaves_nothing(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.duckdb")

    def fail_after_registering() -> None:
        with ledger.atomic():
            ledger.register("bank", bank_graph(), definition="bank")
            raise LookupError("the command failed")

    with pytest.raises(LookupError):
        fail_after_registering()
    assert ledger.registrations() == []
    assert ledger.verify().batches == 0


def test_a_ledger_of_version_5_opens_with_no_definitions(tmp_path: Path) -> None:
    path = tmp_path / "v5.duckdb"
    con = duckdb.connect(str(path))
    for script in MIGRATIONS[:5]:
        con.execute(script)
    con.execute("INSERT INTO meta VALUES ('schema_version', '5')")
    spec = to_spec(bank_graph())
    con.execute(
        "INSERT INTO graphs VALUES ('bank', ?, ?, now())", [spec_hash(spec), json.dumps(spec)]
    )
    con.close()
    ledger = Ledger(path)
    assert ledger.registrations() == [Registration("bank", None)]
    assert ledger.register("bank", bank_graph(), definition="bank") == "unchanged"
    assert ledger.registrations() == [Registration("bank", "bank")]


def test_verify_looks_at_one_pipeline_when_asked(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.duckdb")
    for name in ("bank", "other"):
        ledger.register(name, bank_graph())
    run_epoch(ledger, 0)  # bank: 3 sends, 3 advances, 2 stage runs
    ledger.send("other", "card_payments", 0, MessageEntry("card_payments", 0, 0, "o0"))
    assert ledger.verify("bank").batches == 1 + 8
    assert ledger.verify("other").batches == 1 + 1
    assert ledger.verify().batches == 1 + 8 + 1 + 1
    ledger.compact()  # every batch in the counts table, then tamper with the other's counts
    ledger.release()
    with duckdb.connect(str(ledger.path)) as con:
        con.execute("UPDATE counts SET count = count + 5 WHERE pipeline = 'other'")
    assert ledger.verify("bank").ok
    assert not ledger.verify("other").ok
    assert not ledger.verify().ok
