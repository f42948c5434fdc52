"""Expectations at run time, against the DuckDB oracle: ``warn`` counts and commits unchanged,
``drop`` commits the passing rows and keeps the others in the epoch's quarantine, ``fail``
commits nothing, names the expectation in the run's error and in the blockers of what waits,
and passes after a correction. At a source, a ``fail`` refuses the send and a ``drop``
quarantines at send; a send killed between its check and its commit records nothing. Every
result is in ``Runtime.expectations``."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from pipelines.errors import (
    EpochNotCompleteError,
    ExpectationFailedError,
    InputValidationError,
    RunFailedError,
)
from pipelines.run.runtime import Runtime
from pipelines.stages.expectations import OnFail
from progress.faults import FAULT_ENV, FaultPoint
from progress.ledger import Ledger
from tests.children import run_in_group
from tests.fixtures.shop import ARROW, WORKERS, oracle, rows_of, shop, write_inputs

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[3]


def checked_shop(tmp_path: Path, spark: SparkSession) -> Runtime:
    p = shop(tmp_path / "export")
    p.expect("orders", "positive_amount", "amount > 0", on_fail="drop")
    p.expect("movements", "under_forty", "abs(amount) < 40", on_fail=OnFail.WARN)
    p.expect("movements", "one_row_per_order", unique=["order_id"])
    p.expect("by_region", "region_known", "region IS NOT NULL", on_fail="fail")
    p.expect("refunds", "unique_refund", unique=["order_id"], on_fail="fail")
    return Runtime(p, Ledger(tmp_path / "ledger.duckdb"), spark, tmp_path / "data")


def sql(query: str, files: list[Path]) -> list[tuple[object, ...]]:
    """The oracle: ``query`` over ``raw``, a view of ``files``, in plain DuckDB."""
    con = duckdb.connect()
    con.read_parquet([str(f) for f in files]).create_view("raw")
    return sorted(con.execute(query).fetchall())


def orders_file(path: Path, rows: list[tuple[int, float | None]]) -> Path:
    table = pa.table(
        {
            "order_id": [r[0] for r in rows],
            "customer": ["ann"] * len(rows),
            "category": ["food"] * len(rows),
            "amount": [r[1] for r in rows],
        },
        schema=ARROW["orders"],
    )
    pq.write_table(table, path)
    return path


def customers_file(path: Path, regions: dict[str, str | None]) -> Path:
    table = pa.table(
        {"customer": list(regions), "region": list(regions.values())}, schema=ARROW["customers"]
    )
    pq.write_table(table, path)
    return path


def test_each_action_against_the_oracle_and_a_fail_that_a_correction_clears(
    tmp_path: Path, spark: SparkSession
) -> None:
    rt = checked_shop(tmp_path, spark)
    raw = tmp_path / "raw"
    files: dict[str, dict[int, list[Path]]] = {}
    for source, workers in WORKERS.items():
        for w in range(workers):
            if source == "customers":
                path = customers_file(raw / "c0.parquet", {"ann": "north", "bob": None})
            elif (source, w) == ("orders", 1):  # a negative, a NULL and a large amount
                path = orders_file(raw / "o1.parquet", [(501, -3.0), (502, None), (503, 45.5)])
            else:
                path = write_inputs(raw, source, w, 0, seed=7)
            rt.input(source, w).send(path)
            rt.input(source, w).advance_to(1)
            files.setdefault(source, {}).setdefault(0, []).append(path)

    # drop at the source, at send: the passing rows are the source's output, the others its
    # quarantine.
    orders = files["orders"][0]
    assert rows_of(rt.read("orders", 0)) == sql("SELECT * FROM raw WHERE amount > 0", orders)
    assert rows_of(rt.read("orders", 0, quarantine=True)) == sql(
        "SELECT * FROM raw WHERE amount <= 0 OR amount IS NULL", orders
    )
    assert rows_of(rt.read("refunds", 0, quarantine=True)) == []  # no drop: an empty frame
    kept = [r for r in rt.expectations("orders", 0) if r.expectation == "positive_amount"]
    assert len(kept) == 2  # one per worker's send
    assert all(r.committed and r.action is OnFail.DROP for r in kept)
    checked = sql("SELECT count(*) FROM raw", orders)[0][0]
    failing = sql("SELECT count(*) FROM raw WHERE NOT coalesce(amount > 0, false)", orders)[0][0]
    assert failing >= 2
    assert (sum(r.rows_checked for r in kept), sum(r.rows_failing for r in kept)) == (
        checked,
        failing,
    )

    # fail: by_region's join finds bob's region NULL; nothing of its run is committed.
    expected = oracle({**files, "orders": {0: orders}}, 0)
    joined = expected["by_region"]
    nulls = sum(1 for row in joined if row[4] is None)
    assert nulls >= 1
    region_fails = f"stage by_region epoch 0 failed expectation region_known: {nulls} of "
    region_fails += f"{len(joined)} rows"
    with pytest.raises(RunFailedError) as raised:
        rt.run()
    (stopped,) = raised.value.failures
    assert isinstance(stopped, ExpectationFailedError)
    assert (stopped.stage, stopped.epoch, stopped.expectation) == ("by_region", 0, "region_known")
    assert (stopped.rows_failing, stopped.rows_checked) == (nulls, len(joined))
    assert str(stopped) == f"{region_fails}; nothing was committed"
    assert rt.ledger.message("shop", "by_region", 0, 0) == []
    blockers = rt.blockers("by_region", 0)
    assert region_fails in blockers
    with pytest.raises(EpochNotCompleteError) as held:
        rt.read("by_region", 0)
    assert any(region_fails in b for b in held.value.blockers)
    assert any(region_fails in text for s in rt.status() for text in (f.text for f in s.failed))

    # warn: movements is committed unchanged (the oracle, with the dropped orders gone) and
    # its counts recorded; the other stages ran.
    assert sorted(rows_of(rt.read("movements", 0))) == expected["movements"]
    moves = {r.expectation: r for r in rt.expectations("movements", 0)}
    assert moves["under_forty"].rows_checked == len(expected["movements"])
    assert moves["under_forty"].rows_failing == sum(
        1 for row in expected["movements"] if not abs(row[3]) < 40
    )
    assert moves["one_row_per_order"].action is OnFail.WARN
    stop = [r for r in rt.expectations("by_region") if r.expectation == "region_known"]
    assert len(stop) == 1
    assert not stop[0].committed
    assert stop[0].rows_failing >= 1

    # A correction gives bob a region: the next run passes and commits.
    fixed = customers_file(raw / "c0-fixed.parquet", {"ann": "north", "bob": "south"})
    rt.input("customers", 0).correct(0, fixed)
    rt.run()
    assert rt.blockers("by_region", 0) == []
    assert rt.read("by_region", 0).count() > 0
    last = [r for r in rt.expectations("by_region", 0) if r.committed]
    assert [(r.expectation, r.rows_failing) for r in last] == [("region_known", 0)]


def test_a_source_fail_refuses_the_send_and_commits_nothing(
    tmp_path: Path, spark: SparkSession
) -> None:
    rt = checked_shop(tmp_path, spark)
    path = tmp_path / "dup.parquet"
    orders_file(path, [(1, 1.0), (1, 2.0), (2, 3.0)])
    with pytest.raises(InputValidationError) as raised:
        rt.input("refunds", 0).send(path)
    err = raised.value
    assert (err.stage, err.epoch, err.file) == ("refunds", 0, str(path))
    assert "failed expectation unique_refund: 2 of 3 rows" in str(err)
    assert rt.ledger.message("shop", "refunds", 0, 0) == []
    assert rt.expectations() == []  # a refused send records nothing
    assert not list((tmp_path / "data").rglob("*.parquet"))  # and leaves no file


@pytest.mark.parametrize(
    ("condition", "said"),
    [
        ("nope > 0", "expectation odd (nope > 0) cannot be checked: "),
        ("amount", "expectation odd (amount) "),
    ],
)
def test_a_condition_that_cannot_be_checked_fails_the_run_naming_it(
    tmp_path: Path, spark: SparkSession, condition: str, said: str
) -> None:
    p = shop(tmp_path / "export")
    p.expect("valid_orders", "odd", condition, on_fail="warn")
    rt = Runtime(p, Ledger(tmp_path / "ledger.duckdb"), spark, tmp_path / "data")
    rt.input("orders", 0).send(write_inputs(tmp_path / "raw", "orders", 0, 0, seed=7))
    rt.input("orders", 0).advance_to(1)
    rt.input("orders", 1).advance_to(1)
    with pytest.raises(RunFailedError) as raised:
        rt.run()
    (failure,) = raised.value.failures
    assert (failure.stage, failure.epoch) == ("valid_orders", 0)
    assert failure.cause.startswith(said), failure.cause
    assert rt.ledger.message("shop", "valid_orders", 0, 0) == []
    assert not list((tmp_path / "data" / "shop" / "valid_orders").rglob("*.parquet"))


KILLED_SEND = """
import sys
from pathlib import Path
from pipelines.spark.session import spark_session
from tests.pipelines.run.test_expectations import checked_shop

rt = checked_shop(Path(sys.argv[1]), spark_session("local[1]"))
rt.input("orders", 0).send(Path(sys.argv[2]))
"""


def test_a_send_killed_between_its_check_and_its_commit_leaves_nothing(
    tmp_path: Path, spark: SparkSession
) -> None:
    rt = checked_shop(tmp_path, spark)
    path = orders_file(tmp_path / "orders.parquet", [(1, 5.0), (2, -3.0), (3, 7.0)])
    # The child's first ledger transaction registers the pipeline; its second commits the send.
    env = {**os.environ, FAULT_ENV: f"{FaultPoint.LEDGER_TRANSACTION.value}:2"}
    child = run_in_group(
        [sys.executable, "-c", KILLED_SEND, str(tmp_path), str(path)], cwd=REPO, env=env
    )
    err = child.stderr
    assert child.returncode == -signal.SIGKILL, err[-3000:]
    assert "epochgate fault: killed at ledger-transaction" in err
    data = tmp_path / "data"
    assert [p for p in data.rglob("*.quarantine") if p.is_dir()], "the check did not run"
    assert rt.ledger.message("shop", "orders", 0, 0) == []
    assert rt.expectations() == []  # nothing of the killed send is recorded

    rt.input("orders", 0).send(path)  # once more, whole
    (result,) = rt.expectations()
    assert (result.expectation, result.rows_checked, result.rows_failing) == (
        "positive_amount",
        3,
        1,
    )
    assert len([p for p in data.rglob("*.quarantine") if p.is_dir()]) == 2
    assert rt.collect_garbage(older_than=0)  # the killed send's files: never committed
    assert len([p for p in data.rglob("*.quarantine") if p.is_dir()]) == 1
    kept = sorted((r.order_id, r.amount) for r in rt.read("orders", 0, complete=False).collect())
    assert kept == [(1, 5.0), (3, 7.0)]
    dropped = rt.read("orders", 0, complete=False, quarantine=True).collect()
    assert [(r.order_id, r.amount) for r in dropped] == [(2, -3.0)]
    assert rt.ledger.verify().ok
