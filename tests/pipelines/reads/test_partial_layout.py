"""The layout of the messages partial stages read: sorted by the partial stage's key in small
row groups (so an upquery's key filter skips most of each file), only where a partial stage
reads them; and upqueries of many keys over that layout, checked against DuckDB SQL."""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from pipelines import Pipeline
from pipelines.reads.upquery import IN_FILTER_KEYS, scan_settings, scan_settings_for
from pipelines.run.layout import ROW_GROUP_ROWS, sort_key
from pipelines.run.runtime import Runtime
from progress.ledger import Ledger
from tests.fixtures.partials import (
    AGGS,
    MOVES,
    Raw,
    branch_pipeline,
    chain_pipeline,
    ledger_pipeline,
)

pytestmark = pytest.mark.slow(50)


def layout_pipeline() -> Pipeline:
    """``moves`` read by the partial aggregate ``totals`` and, through the transform
    ``doubled``, by the partial aggregate ``doubled_totals``; ``other`` read by a full one."""
    p = Pipeline("layout")
    moves = p.source("moves", schema=MOVES)
    other = p.source("other", schema=MOVES)
    doubled = p.transform(
        "doubled", moves, fn=lambda df: df.withColumn("amount", F.col("amount") * 2)
    )
    p.aggregate("totals", moves, key=["account"], aggs=AGGS, partial=True)
    p.aggregate("doubled_totals", doubled, key=["account"], aggs=AGGS, partial=True)
    p.aggregate("other_totals", other, key=["account"], aggs=AGGS)
    return p


@pytest.mark.unit
def test_only_messages_a_partial_stage_reads_from_a_full_stage_are_sorted_by_its_key() -> None:
    stages = layout_pipeline().stages
    assert sort_key(stages, "moves") == ("account",)
    assert sort_key(stages, "doubled") == ("account",)
    assert sort_key(stages, "other") is None  # read by a full stage only
    assert sort_key(stages, "totals") is None  # read by no one
    chain = chain_pipeline().stages
    assert sort_key(chain, "cards") == ("account",)  # the union catalogs its files as they are
    assert sort_key(chain, "moves") == ("account",)
    assert sort_key(chain, "totals") is None  # the partial stage below re-derives from it
    branch = branch_pipeline().stages
    assert sort_key(branch, "tagged") == ("branch",)
    assert sort_key(branch, "moves") == ("account",)
    assert sort_key(branch, "branches") is None


def sorted_in_row_groups(path: Path, column: str) -> list[tuple[int, int]]:
    """Each row group's (min, max) of ``column`` across the message's files, asserting each
    file is sorted by it and has a page index on it (a key's scan decodes only the pages that
    can hold the key)."""
    ranges = []
    for part in sorted(path.glob("*.parquet")):
        values = pq.read_table(part, columns=[column]).column(column).to_pylist()
        assert values == sorted(values), part
        meta = pq.ParquetFile(part).metadata
        index = meta.schema.names.index(column)
        for g in range(meta.num_row_groups):
            chunk = meta.row_group(g).column(index)
            assert chunk.has_column_index, (part, g)
            assert chunk.has_offset_index, (part, g)
            ranges.append((chunk.statistics.min, chunk.statistics.max))
    return ranges


@pytest.mark.spark
def test_messages_partial_stages_read_are_sorted_and_upqueries_of_many_keys_are_exact(
    tmp_path: Path, spark: SparkSession
) -> None:
    rt = Runtime(layout_pipeline(), Ledger(tmp_path / "ledger.duckdb"), spark, tmp_path / "data")
    raw = Raw(rt, tmp_path / "raw")
    rnd = random.Random(5)
    rows = 2 * ROW_GROUP_ROWS + 100
    epochs = {
        e: [(rnd.randrange(5_000), 1, rnd.randrange(-1_000, 1_000)) for _ in range(rows)]
        for e in range(2)
    }
    raw.epochs("moves", epochs)
    raw.epochs("other", {0: epochs[0][:50]})
    rt.run()
    sent = raw.files[("other", 0, 0)][0]
    (other,) = rt.ledger.message("layout", "other", 0, 0)
    assert other.path is not None
    assert (Path(other.path) / "part-00000.parquet").read_bytes() == sent.read_bytes()
    for epoch in epochs:
        (moves,) = rt.ledger.message("layout", "moves", 0, epoch)
        assert moves.path is not None
        ranges = sorted_in_row_groups(Path(moves.path), "account")
        assert len(ranges) == 3  # ROW_GROUP_ROWS each, but the last
        assert all(a[1] <= b[0] for a, b in itertools.pairwise(ranges))
        (doubled,) = rt.ledger.message("layout", "doubled", 0, epoch)
        assert doubled.path is not None
        sorted_in_row_groups(Path(doubled.path), "account")  # written by Spark, sorted
    con = duckdb.connect()
    sent_rows = pa.table(
        {
            "epoch": [epoch for epoch, moved in epochs.items() for _ in moved],
            "account": [a for moved in epochs.values() for a, _, _ in moved],
            "amount": [m for moved in epochs.values() for _, _, m in moved],
        }
    )
    con.register("sent_rows", sent_rows)
    con.execute("CREATE TABLE raw AS SELECT * FROM sent_rows")
    keys = [*rnd.sample(range(5_000), 40), 9_999]  # more than Spark's 10 pushed as values
    before = spark.conf.get("spark.sql.parquet.pushdown.inFilterThreshold", None)
    for stage, times in (("totals", 1), ("doubled_totals", 2)):
        found = rt.lookup(stage, keys)
        assert found.upqueried == keys
        expected = con.execute(
            f"SELECT account, sum(amount) * {times} AS total, count(*) AS net, "  # sign is 1
            f"count(*) AS moves, min(amount) * {times} AS low, max(amount) * {times} AS high "
            "FROM raw WHERE account IN (SELECT unnest(?)) GROUP BY account",
            [keys],
        ).fetchall()
        by_key = {r[0]: r for r in expected}  # doubling keeps min and max where they are
        assert [tuple(r.values()) for r in found.rows] == [by_key[k] for k in keys if k in by_key]
    assert spark.conf.get("spark.sql.parquet.pushdown.inFilterThreshold", None) == before


@pytest.mark.spark
def test_scan_settings_hold_during_an_upquery_only(spark: SparkSession) -> None:
    name = "spark.sql.parquet.pushdown.inFilterThreshold"
    assert scan_settings_for(3)[name] == "10"
    assert scan_settings_for(200)[name] == "200"
    assert scan_settings_for(10 * IN_FILTER_KEYS)[name] == str(IN_FILTER_KEYS)
    spark.conf.set(name, "7")
    try:
        with scan_settings(spark, 200):
            assert spark.conf.get(name) == "200"
        assert spark.conf.get(name) == "7"
    finally:
        spark.conf.unset(name)


@pytest.mark.spark
def test_a_full_twin_is_unaffected_by_the_layout(tmp_path: Path, spark: SparkSession) -> None:
    rt = Runtime(
        ledger_pipeline("full_layout", partial=False),
        Ledger(tmp_path / "ledger.duckdb"),
        spark,
        tmp_path / "data",
    )
    raw = Raw(rt, tmp_path / "raw")
    raw.epochs("moves", {0: [(3, 1, 5), (1, 1, 7)]})
    (moves,) = rt.ledger.message("full_layout", "moves", 0, 0)
    assert moves.path is not None
    sent = raw.files[("moves", 0, 0)][0]
    assert (Path(moves.path) / "part-00000.parquet").read_bytes() == sent.read_bytes()
