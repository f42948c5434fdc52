"""What an upquery reads: only the row groups of its input messages that can hold the keys,
in the driver for a few keys, with Spark past the driver's budget; the same rows either way,
and after a revision, checked against DuckDB SQL over the raw inputs (``Oracle``)."""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import types as T

from pipelines.reads.key_scan import arrow_type, plan, read
from pipelines.run.layout import ROW_GROUP_ROWS
from pipelines.run.runtime import Runtime
from pipelines.spark.footers import Footers
from progress.ledger import Ledger
from tests.fixtures.partials import MOVES, Move, Raw, ledger_pipeline

ACCOUNTS = 3_000
ROWS = 2 * ROW_GROUP_ROWS + 100
"""Rows per epoch: three row groups per message (``pipelines.run.layout``)."""


def moves(epoch: int) -> list[Move]:
    rnd = random.Random(epoch)
    return [(rnd.randrange(ACCOUNTS), 1, rnd.randrange(-1_000, 1_000)) for _ in range(ROWS)]


@pytest.mark.spark
def test_an_upquery_reads_one_row_group_per_epoch_not_every_file_whole(
    tmp_path: Path, spark: SparkSession
) -> None:
    rt = Runtime(
        ledger_pipeline("scan"), Ledger(tmp_path / "ledger.duckdb"), spark, tmp_path / "data"
    )
    raw = Raw(rt, tmp_path / "raw")
    raw.epochs("moves", {e: moves(e) for e in range(3)})
    rt.run()
    for epochs, key in ((3, 0), (6, ACCOUNTS - 1)):  # the first key, then the last
        if epochs > 3:
            raw.epochs("moves", {e: moves(e) for e in range(3, epochs)})
            rt.run()
        found = rt.lookup("totals", [key])
        assert found.upqueried == [key]
        assert found.rows == raw.oracle().totals(epochs - 1, [key])
        (scan,) = found.scans
        assert scan.driver
        assert (scan.files, scan.row_groups) == (epochs, 3 * epochs)
        assert scan.groups_read == epochs  # the one row group of each file that holds the key
        assert scan.rows <= epochs * ROW_GROUP_ROWS
    fold = rt.lookup("balances", [7, 8, ACCOUNTS + 5])  # a key with no row fills too
    assert fold.rows == raw.oracle().balances(5, [7, 8, ACCOUNTS + 5])
    assert all(s.driver and s.groups_read < s.row_groups for s in fold.scans)


@pytest.mark.spark
def test_past_the_drivers_budget_spark_scans_and_answers_the_same_and_revisions_are_read(
    tmp_path: Path, spark: SparkSession
) -> None:
    rt = Runtime(
        ledger_pipeline("budget"), Ledger(tmp_path / "ledger.duckdb"), spark, tmp_path / "data"
    )
    raw = Raw(rt, tmp_path / "raw")
    raw.epochs("moves", {e: moves(e) for e in range(2)})
    rt.run()
    keys = [1, 2_999, 1_500, 40_000]
    driver = rt.lookup("totals", keys)
    assert [s.driver for s in driver.scans] == [True]
    rt.evict("totals", keys)
    rt._reads.upquery.driver_rows = ROW_GROUP_ROWS  # the keys' row groups hold more
    scanned = rt.lookup("totals", keys)
    assert [s.driver for s in scanned.scans] == [False]
    assert scanned.rows == driver.rows == raw.oracle().totals(1, keys)
    rt._reads.upquery.driver_rows = 10 * ROWS
    raw.correct("moves", 1, [(1, 1, 5), (2_999, 1, 7), (7, 1, 9)])  # a revision of epoch 1
    rt.run()
    rt.evict("totals", keys)
    revised = rt.lookup("totals", [*keys, 7])  # the footers read before are of other files
    assert [s.driver for s in revised.scans] == [True]
    assert revised.rows == raw.oracle().totals(1, [*keys, 7])


@pytest.mark.unit
def test_a_plan_keeps_only_row_groups_whose_range_holds_a_key(tmp_path: Path) -> None:
    import pyarrow as pa

    path = tmp_path / "part-0.parquet"
    table = pa.table({"account": list(range(100)), "sign": [1] * 100, "amount": [5] * 100})
    pq.write_table(table, path, row_group_size=10)
    footers = Footers(kept=1)
    found = plan({str(path): 4}, MOVES, ["account"], [(15,), (16,), (99,), (500,)], footers)
    assert [(p.epoch, p.groups) for p in found.parts] == [(4, (1, 9))]
    assert (found.files, found.row_groups, found.rows, found.driver) == (1, 10, 20, True)
    assert not plan({str(path): 4}, MOVES, ["account"], [(15,)], footers, driver_rows=9).driver
    assert not plan({str(path): 4}, MOVES, ["account"], [(1 << 70,)], footers).driver  # Spark's
    timestamps = T.StructType([*MOVES.fields, T.StructField("at", T.TimestampType())])
    assert arrow_type(T.TimestampType()) is None
    assert not plan({str(path): 4}, timestamps, ["account"], [(15,)], footers).driver


@pytest.mark.unit
def test_files_that_differ_in_nullability_are_read_together(tmp_path: Path) -> None:
    import pyarrow as pa

    rows = {"account": [3, 4], "sign": [1, 1], "amount": [5, 6]}
    strict = pa.schema([pa.field(n, pa.int64(), nullable=False) for n in rows])
    pq.write_table(pa.table(rows), tmp_path / "a.parquet")
    pq.write_table(pa.table(rows, schema=strict), tmp_path / "b.parquet")
    files = {str(tmp_path / "a.parquet"): 0, str(tmp_path / "b.parquet"): 1}
    footers = Footers()
    scan = plan(files, MOVES, ["account"], [(4,)], footers)
    found = read(scan, MOVES, ["account"], [(4,)], footers, epoch_column="_epoch")
    assert found.to_pylist() == [
        {"account": 4, "sign": 1, "amount": 6, "_epoch": 0},
        {"account": 4, "sign": 1, "amount": 6, "_epoch": 1},
    ]
