"""Backfills as revisions: outputs replaced, stale work re-run, frontiers kept, nothing twice."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from pipelines.errors import BackfillIncompleteError, PipelineError
from pipelines.examples import bank
from pipelines.examples.bank_data import Oracle
from pipelines.examples.demo import run_demo, verify_outputs
from pipelines.run.runtime import Runtime
from progress.ledger import Ledger
from state_store import KeyedState
from tests.fixtures.shop import WORKERS, Shop, oracle, rows_of, shop
from tests.lock_files import blocked
from tests.waiting import wait_until

pytestmark = [pytest.mark.spark, pytest.mark.slow(44)]


def test_a_code_change_revised_reaches_every_downstream_output(
    tmp_path: Path, spark: SparkSession
) -> None:
    first = Shop(tmp_path, spark)
    first.run_epochs(3)
    before = first.ledger.tracker("shop").pointstamps()
    fixed = Runtime(shop(first.sink, threshold=10), first.ledger, spark, tmp_path / "data")
    revised = fixed.revise("valid_orders", [0, 1, 2])
    assert [r.status for r in revised] == ["revised"] * 3
    status = {s.stage: s for s in first.ledger.status("shop")}
    assert status["movements"].stale == (0, 1, 2)
    assert status["by_category"].stale == ()  # it read movements, which is not replaced yet
    fixed.run()
    assert fixed.stale() == []
    for epoch in range(3):
        expected = oracle(first.files, epoch, threshold=10)
        for stage in ("valid_orders", "movements", "by_category", "by_region"):
            assert rows_of(fixed.read_arrow(stage, epoch)) == expected[stage], f"{stage} {epoch}"
    settled = oracle(first.files, 4, threshold=10)["settled"]
    assert rows_of(fixed.read_arrow("settled", 4)) == settled
    exported = rows_of(spark.read.parquet(str(first.sink / "epoch=2")))
    assert exported == oracle(first.files, 2, threshold=10)["by_category"]
    assert first.ledger.tracker("shop").pointstamps() == before  # frontiers never moved back
    assert first.ledger.verify().ok
    with pytest.raises(PipelineError, match="has not run epoch"):
        fixed.revise("valid_orders", [7])


def demo_runtime(home: Path, spark: SparkSession, state: KeyedState | None = None) -> Runtime:
    ledger = Ledger(home / "ledger.duckdb")
    return Runtime(bank.pipeline(), ledger, spark, home / "data", state=state)


class ForgetfulState(KeyedState):
    """A broken store that does not rewind before a revision: it counts epochs twice."""

    def rewind(self, pipeline: str, stage: str, key: object, epoch: int) -> None:
        return None


@pytest.fixture(scope="module")
def done_demo(tmp_path_factory: pytest.TempPathFactory, spark: SparkSession) -> Path:
    """The bank demo's home after 3 epochs, run once: each test revises a copy of it (revisions
    write new attempts under the copy and leave the original's files alone)."""
    home = tmp_path_factory.mktemp("revise") / "demo"
    run_demo(home, epochs=3, rows=300, accounts=20, seed=3, echo=lambda _: None)
    return home


@pytest.mark.parametrize("broken", [False, True], ids=["rewinds", "double-counts"])
def test_a_backfill_of_the_same_code_changes_nothing(
    tmp_path: Path, spark: SparkSession, done_demo: Path, broken: bool
) -> None:
    home = shutil.copytree(done_demo, tmp_path / "demo")
    state = ForgetfulState(home / "state.duckdb") if broken else None
    rt = demo_runtime(home, spark, state)
    results = rt.revise("valid_cards", [1])
    results += rt.run()
    revised = sorted((r.stage, r.epoch) for r in results)
    assert ("balances", 1) in revised
    assert ("balances", 2) in revised  # stateful: recomputed from the revised epoch onward
    assert ("balances", 0) not in revised
    mismatches = verify_outputs(rt, Oracle(home / "inputs"), 3)
    if broken:
        assert any(m.startswith("balances") for m in mismatches), "double counting went unseen"
    else:
        assert mismatches == []
        assert rt.ledger.verify().ok
        rt.lookup("balances", [3])  # balances is partial: account 3 is present from now on
        value = rt.state.value_as_of("bank", "balances", {"account_id": 3}, 0)
        assert value is not None
        assert value["_epoch"] == 0


def test_a_backfill_runs_the_epochs_it_can_and_names_the_blockers_of_the_rest(
    tmp_path: Path, spark: SparkSession
) -> None:
    held = Shop(tmp_path, spark)
    rt = held.rt
    for epoch in range(3):
        for source, workers in WORKERS.items():
            for w in range(workers):
                if (source, w) == ("orders", 1) and epoch == 2:
                    continue  # worker 1 of orders holds epoch 2 open
                held.send(source, w, epoch)
                rt.input(source, w).advance_to(epoch + 1)
    rt.run()  # epochs 0 and 1 done everywhere
    held.send("orders", 1, 2)
    rt.input("orders", 1).advance_to(3)  # epoch 2 is ready (not run); every worker holds 3

    with pytest.raises(BackfillIncompleteError) as err:
        rt.backfill("valid_orders", [0, 1, 2, 3])
    assert (err.value.pipeline, err.value.stage) == ("shop", "valid_orders")
    blockers = [h.text for h in held.ledger.blockers("shop", "valid_orders", 3)]
    assert err.value.left == {3: tuple(dict.fromkeys(blockers))}
    assert "source orders, worker 1, still holds epoch 3" in err.value.left[3]
    assert "epoch 3: source orders, worker 0, still holds epoch 3" in str(err.value)
    ran = [(r.stage, r.epoch, r.status) for r in err.value.results]
    own = [r for r in ran if r[0] == "valid_orders"]
    assert own == [
        ("valid_orders", 0, "revised"),
        ("valid_orders", 1, "revised"),
        ("valid_orders", 2, "succeeded"),
    ]
    for epoch in (0, 1):  # what read the revised epochs re-ran
        assert ("movements", epoch, "revised") in ran
        assert ("by_category", epoch, "revised") in ran
    assert rt.stale() == []
    assert held.ledger.message("shop", "valid_orders", 0, 3) == []  # nothing ran at epoch 3
    for epoch in range(3):
        expected = oracle(held.files, epoch)
        assert rows_of(rt.read_arrow("valid_orders", epoch)) == expected["valid_orders"]
    for epoch in (0, 1):
        expected = oracle(held.files, epoch)
        for stage in ("movements", "by_category"):
            assert rows_of(rt.read_arrow(stage, epoch)) == expected[stage]
    assert held.ledger.verify().ok


def test_a_stateful_stage_waits_for_another_run_of_it(tmp_path: Path, spark: SparkSession) -> None:
    """A revision of ``balances`` waits while another process (here, another handle on the
    state store's lock) is changing its state, then runs from the state that one left."""
    home = tmp_path / "demo"
    run_demo(home, epochs=2, rows=200, accounts=20, seed=4, echo=lambda _: None)
    rt = demo_runtime(home, spark)
    before = rt.ledger.history("bank", "balances", 1).messages
    other = KeyedState(home / "state.duckdb")
    results: list[str] = []
    with other.writer("bank", "balances"):
        worker = threading.Thread(
            target=lambda: results.extend(r.status for r in rt.revise("balances", [1]))
        )
        worker.start()
        lock = other.writer_lock_path("bank", "balances")
        wait_until(lambda: blocked(lock) or not worker.is_alive(), 120, "the revision's wait")
        assert worker.is_alive(), "the revision did not wait for the state's other writer"
        assert rt.ledger.history("bank", "balances", 1).messages == before
    worker.join(120)
    assert results == ["revised"]
    assert verify_outputs(rt, Oracle(home / "inputs"), 2) == []
    assert rt.ledger.verify().ok
