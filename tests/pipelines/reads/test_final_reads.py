"""Reads that respect completeness: ``Runtime.read`` returns an epoch only once it is final, and
otherwise names what holds it (a source worker, a run still to come, a stale output); it can
wait for another process to finish the epoch; ``complete=False`` reads what is committed now."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from pipelines.errors import EpochNotCompleteError, PipelineError
from pipelines.stages.pipeline import Pipeline
from pipelines.testing import send_epochs, throwaway_runtime
from tests.fixtures.shop import Shop, oracle, rows_of
from tests.pipelines.run.test_corrections import orders_file

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[3]


def order_ids(df: DataFrame) -> list[int]:
    return sorted(row[0] for row in df.select("order_id").collect())


def raw_ids(shop: Shop, epoch: int) -> list[int]:
    """The oracle: the order ids of the raw orders files sent at ``epoch``, in DuckDB."""
    paths = [str(p) for p in shop.files["orders"][epoch]]
    return sorted(r[0] for r in duckdb.read_parquet(paths).select("order_id").fetchall())


def not_final(shop: Shop, stage: str, epoch: int) -> tuple[str, ...]:
    with pytest.raises(EpochNotCompleteError) as raised:
        shop.rt.read(stage, epoch)
    err = raised.value
    assert (err.stage, err.epoch) == (stage, epoch)
    assert str(err) == f"stage {stage!r} epoch {epoch} is not final: {'; '.join(err.blockers)}"
    return err.blockers


def test_a_held_epoch_is_refused_naming_its_holder_and_read_once_released(
    tmp_path: Path, spark: SparkSession
) -> None:
    shop = Shop(tmp_path, spark)
    rt = shop.rt
    for source in ("refunds", "customers"):
        shop.send(source, 0, 0)
        rt.input(source, 0).advance_to(1)
    shop.send("orders", 0, 0)
    rt.input("orders", 0).advance_to(1)  # worker 1 still holds epoch 0
    rt.run()

    held = "source orders, worker 1, still holds epoch 0"
    assert not_final(shop, "orders", 0) == (held,)
    waits = not_final(shop, "by_category", 0)
    assert held in waits
    assert list(waits) == rt.blockers("by_category", 0)  # the sentences status gives
    # What does not read orders is final: refunds' epoch 0 is complete and has run.
    expected = oracle(shop.files, 0)
    assert sorted(rows_of(rt.read("refunds_negated", 0))) == expected["refunds_negated"]
    # complete=False: what is committed now (worker 0's orders), for debugging.
    assert order_ids(rt.read("orders", 0, complete=False)) == raw_ids(shop, 0)

    shop.send("orders", 1, 0)
    rt.input("orders", 1).advance_to(1)
    assert set(not_final(shop, "by_category", 0)) == {
        "stage valid_orders has not run epoch 0 yet (2 message(s) waiting)",
        "stage movements has not run epoch 0 yet (1 message(s) waiting)",
    }
    assert order_ids(rt.read("orders", 0)) == raw_ids(shop, 0)  # both workers' files now
    rt.run()
    expected = oracle(shop.files, 0)  # with worker 1's file
    for stage in ("valid_orders", "movements", "by_category", "by_region"):
        assert sorted(rows_of(rt.read(stage, 0))) == expected[stage], stage


def test_a_corrected_epoch_is_stale_until_its_readers_run_again(
    tmp_path: Path, spark: SparkSession
) -> None:
    shop = Shop(tmp_path, spark)
    shop.run_epochs(3)
    rt = shop.rt
    fixed = orders_file(tmp_path / "redelivered" / "w0-e1.parquet", 9000, [12.5, -3.0, 40.0])
    rt.input("orders", 0).correct(1, fixed)
    shop.files["orders"][1][0] = fixed

    stale = "stage valid_orders epoch 1 is stale: its input was corrected"
    assert not_final(shop, "valid_orders", 1) == (stale,)
    assert stale in not_final(shop, "by_category", 1)
    assert stale in not_final(shop, "settled", 3)  # it reads movements two epochs back
    for stage, epoch in (("by_category", 2), ("valid_orders", 0), ("settled", 2)):
        rt.read(stage, epoch)  # what the correction does not change is final

    rt.run()
    expected = oracle(shop.files, 1)
    assert sorted(rows_of(rt.read("by_category", 1))) == expected["by_category"]


def test_a_final_epoch_without_rows_is_empty_with_the_stages_columns(
    tmp_path: Path, spark: SparkSession
) -> None:
    p = Pipeline("nums")
    schema = T.StructType([T.StructField("k", T.LongType()), T.StructField("v", T.LongType())])
    nums = p.source("nums", schema=schema)
    p.transform("doubled", nums, fn=lambda df: df.selectExpr("k", "v * 2 AS v2"))
    with throwaway_runtime(p, spark, home=tmp_path) as rt:
        send_epochs(rt, "nums", {0: [(1, 2)], 2: [(3, 4)]}, close=True)
        rt.run()
        empty = rt.read("doubled", 1)
        assert (empty.columns, empty.count()) == (["k", "v2"], 0)
        assert rows_of(rt.read("doubled", 2)) == [(3, 8)]


ADVANCE = """
import sys, time
from pathlib import Path
from pipelines.run.runtime import Runtime
from pipelines.spark.session import spark_session
from progress.ledger import Ledger
from tests.fixtures.shop import shop

root = Path(sys.argv[1])
time.sleep(float(sys.argv[2]))
rt = Runtime(shop(root / "export"), Ledger(root / "ledger.duckdb"), spark_session, root / "data")
rt.input("orders", 1).advance_to(1)
assert not rt.spark_started
print("advanced", flush=True)
"""


def test_a_read_waits_for_another_process_to_finish_the_epoch(
    tmp_path: Path, spark: SparkSession
) -> None:
    shop = Shop(tmp_path, spark)
    rt = shop.rt
    shop.send("orders", 0, 0)
    rt.input("orders", 0).advance_to(1)
    rt.input("orders", 1)  # worker 1 sends nothing at epoch 0: another process advances it

    with pytest.raises(EpochNotCompleteError):
        rt.read("orders", 0, wait=0.6)
    child = subprocess.Popen(
        [sys.executable, "-c", ADVANCE, str(tmp_path), "1.0"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        started = time.monotonic()
        read = rt.read("orders", 0, wait=120)
        assert time.monotonic() - started >= 1.0
        assert order_ids(read) == raw_ids(shop, 0)
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err[-2000:]
        assert out.strip() == "advanced"
    finally:
        child.kill()


def test_wait_takes_seconds(tmp_path: Path, spark: SparkSession) -> None:
    shop = Shop(tmp_path, spark)
    for wrong, said in ((True, "not True"), (-1, "not -1")):
        with pytest.raises(PipelineError, match=f"wait= takes the seconds .*, {said}$"):
            shop.rt.read("orders", 0, wait=wrong)
