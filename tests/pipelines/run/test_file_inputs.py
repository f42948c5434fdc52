"""``send`` checks a Parquet file without Spark when every column's type maps to Spark's: the
mapping equals what Spark reads (timestamps with and without a time zone, decimals, lists,
structs, maps), a file of those types is sent with no Spark session started, a mistyped column
is named, and a timestamp in nanoseconds is refused naming its column."""

from __future__ import annotations

import datetime
import decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import types as T

from pipelines.errors import InputValidationError
from pipelines.run.file_inputs import NanosecondsError, spark_type
from pipelines.run.runtime import Runtime
from pipelines.stages.pipeline import Pipeline
from progress.ledger import Ledger

pytestmark = pytest.mark.spark

WHEN = datetime.datetime(2026, 11, 28, 8, 30)
ARROW: dict[str, tuple[pa.DataType, Any]] = {
    "utc": (pa.timestamp("us", tz="UTC"), WHEN),
    "paris_ms": (pa.timestamp("ms", tz="Europe/Paris"), WHEN),
    "local": (pa.timestamp("us"), WHEN),
    "local_ms": (pa.timestamp("ms"), WHEN),
    "cents": (pa.decimal128(12, 2), decimal.Decimal("12.34")),
    "wide": (pa.decimal128(38, 0), decimal.Decimal(10) ** 30),
    "tags": (pa.list_(pa.string()), ["a", "b"]),
    "big_list": (pa.large_list(pa.int32()), [1, 2]),
    "point": (pa.struct([("x", pa.float64()), ("y", pa.int16())]), {"x": 1.5, "y": 2}),
    "attrs": (pa.map_(pa.string(), pa.int64()), [("k", 1)]),
    "deep": (pa.list_(pa.struct([("v", pa.list_(pa.int8()))])), [{"v": [1]}]),
    "small": (pa.uint8(), 7),
    "huge": (pa.uint64(), 2**63),
    "raw": (pa.binary(3), b"abc"),
    "label": (pa.string(), "x"),
    "day": (pa.date32(), datetime.date(2026, 11, 28)),
}


def arrow_file(path: Path, columns: dict[str, tuple[pa.DataType, Any]]) -> Path:
    table = pa.table({name: pa.array([value], kind) for name, (kind, value) in columns.items()})
    pq.write_table(table, path)
    return path


def test_every_mapped_type_is_what_spark_reads(tmp_path: Path, spark: SparkSession) -> None:
    path = arrow_file(tmp_path / "all.parquet", ARROW)
    read = {f.name: f.dataType.simpleString() for f in spark.read.parquet(str(path)).schema}
    stored = pq.read_schema(path)
    mapped = {name: spark_type(stored.field(name).type) for name in ARROW}
    assert mapped == read
    assert spark_type(pa.dictionary(pa.int32(), pa.string())) == "string"
    assert spark_type(pa.time64("us")) is None  # left to Spark, which refuses it
    assert spark_type(pa.struct([("a b", pa.int64())])) is None  # a name Spark quotes
    for unit in (None, "UTC"):
        with pytest.raises(NanosecondsError):
            spark_type(pa.timestamp("ns", tz=unit))


def test_a_file_of_rich_types_is_sent_without_spark_and_a_mistyped_one_named(
    tmp_path: Path, spark: SparkSession
) -> None:
    path = arrow_file(tmp_path / "all.parquet", ARROW)
    schema = spark.read.parquet(str(path)).schema  # the source declares what Spark reads
    p = Pipeline("rich")
    p.source("rows", schema=schema, workers=1)

    def refused() -> SparkSession:
        raise AssertionError("the send started Spark")

    rt = Runtime(p, Ledger(tmp_path / "l.duckdb"), refused, tmp_path / "data")
    rt.input("rows").send(path)
    assert not rt.spark_started
    (message,) = rt.ledger.message("rich", "rows", 0, 0)
    assert message.rows == 1

    wrong = dict(ARROW, cents=(pa.decimal128(12, 3), decimal.Decimal("1.234")))
    with pytest.raises(InputValidationError) as raised:
        rt.input("rows").send(arrow_file(tmp_path / "wrong.parquet", wrong))
    assert raised.value.column == "cents"
    assert "decimal(12,3)" in str(raised.value)
    assert "decimal(12,2)" in str(raised.value)

    nanos = dict(ARROW, local=(pa.timestamp("ns"), WHEN))
    bad = tmp_path / "nanos.parquet"
    table = pa.table({n: pa.array([v], k) for n, (k, v) in nanos.items()})
    pq.write_table(table, bad, coerce_timestamps=None, version="2.6")
    with pytest.raises(InputValidationError) as raised:
        rt.input("rows").send(bad)
    assert raised.value.column == "local"
    assert "nanoseconds" in str(raised.value)
    assert not rt.spark_started
    assert T.TimestampNTZType() in [f.dataType for f in schema]
