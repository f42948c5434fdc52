"""``Runtime.read_arrow``: the rows and types ``read`` gives through Spark's ``toArrow()``, read
from the committed files with no Spark job (a stage that is not materialized through Spark);
refused where ``read`` refuses. And ``pipelines.reads.arrow_rows.table`` on files Spark did
not write: a missing column or a type that does not cast is left to Spark."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines import Pipeline
from pipelines.errors import EpochNotCompleteError
from pipelines.reads import arrow_rows
from pipelines.reads.arrow_rows import collected_rows
from pipelines.run.runtime import Runtime
from pipelines.testing import send_epochs, throwaway_runtime

ORDERS = T.StructType(
    [
        T.StructField("order_id", T.LongType()),
        T.StructField("shop", T.StringType()),
        T.StructField("price", T.DecimalType(10, 2)),
        T.StructField("placed", T.TimestampType()),
        T.StructField("day", T.DateType()),
    ]
)
SHOPS = T.StructType([T.StructField("shop", T.StringType()), T.StructField("city", T.StringType())])
UTC = dt.UTC


def by_city(orders: DataFrame) -> DataFrame:
    return orders.groupBy("city").agg(
        F.sum("price").alias("total"),
        F.max("placed").alias("last"),
        F.struct(F.min("order_id").alias("first"), F.max("day").alias("day")).alias("span"),
        F.create_map(F.lit("orders"), F.count(F.lit(1))).alias("counts"),
    )


def shops_pipeline() -> Pipeline:
    """Orders (declared columns, one of them dropped by an expectation) joined with a dimension
    through a stage that is not materialized, then summed by city (columns from its files)."""
    p = Pipeline("arrow_reads")
    orders = p.source("orders", schema=ORDERS, workers=2)
    shops = p.dimension("shops", schema=SHOPS)
    p.expect(orders, "priced", "price > 0", on_fail="drop")
    placed = p.join("placed", orders, shops, on=["shop"], materialize=False)
    p.transform("by_city", placed, fn=by_city)
    return p


def at(hour: int) -> dt.datetime:
    return dt.datetime(2026, 11, 2, hour, 30, tzinfo=UTC)


def order(order_id: int, shop: str, price: str, hour: int) -> tuple[object, ...]:
    return (order_id, shop, Decimal(price), at(hour), dt.date(2026, 11, 2))


def spark_rows(rt: Runtime, stage: str, epoch: int, **options: bool) -> pa.Table:
    """What ``read`` gives, through Spark's ``toArrow()``."""
    return arrow_rows.from_frame(rt.read(stage, epoch, **options))


def sorted_rows(table: pa.Table) -> list[tuple[object, ...]]:
    columns = [table.column(i).to_pylist() for i in range(table.num_columns)]
    return sorted(zip(*columns, strict=True), key=repr)


@pytest.mark.spark
def test_every_stage_and_epoch_reads_as_spark_reads_it(spark: SparkSession) -> None:
    with throwaway_runtime(shops_pipeline(), spark) as rt:
        send_epochs(rt, "shops", {0: [("a", "Oslo"), ("b", "Rome")], 2: [("b", "Oslo")]})
        send_epochs(
            rt, "orders", {0: [order(1, "a", "5.25", 9), order(2, "b", "-1.00", 10)], 1: []}
        )
        send_epochs(
            rt,
            "orders",
            {0: [order(3, "b", "2.50", 11)], 1: [], 2: [order(4, "b", "7.00", 12)]},
            worker=1,
        )
        rt.input("shops", 0).advance_to(3)
        # Epoch 2 is open (a worker of orders is at it): read only when asked for what is there.
        assert rt.read_arrow("orders", 2, complete=False).column("order_id").to_pylist() == [4]
        rt.input("orders", 0).advance_to(3)
        with pytest.raises(EpochNotCompleteError) as by_spark:
            rt.read("by_city", 0)
        with pytest.raises(EpochNotCompleteError) as by_arrow:
            rt.read_arrow("by_city", 0)
        assert str(by_arrow.value) == str(by_spark.value)
        rt.run()

        for stage in ("orders", "shops", "placed", "by_city"):
            for epoch in range(3):
                read = rt.read_arrow(stage, epoch)
                assert read.schema == spark_rows(rt, stage, epoch).schema, (stage, epoch)
                assert sorted_rows(read) == sorted_rows(spark_rows(rt, stage, epoch))
                collected = [tuple(r) for r in rt.read(stage, epoch).collect()]
                assert sorted(collected_rows(read, read.column_names), key=repr) == sorted(
                    collected, key=repr
                )
        quarantined = rt.read_arrow("orders", 0, quarantine=True)
        assert sorted_rows(quarantined) == [order(2, "b", "-1.00", 10)]
        assert quarantined.schema == spark_rows(rt, "orders", 0, quarantine=True).schema
        assert rt.read_arrow("orders", 1, quarantine=True).num_rows == 0

        # The dimension as of each epoch; an epoch without rows is an empty typed table.
        assert sorted_rows(rt.read_arrow("shops", 1)) == [("a", "Oslo"), ("b", "Rome")]
        assert sorted_rows(rt.read_arrow("shops", 2)) == [("b", "Oslo")]
        assert rt.read_arrow("by_city", 1).num_rows == 0
        day = dt.date(2026, 11, 2)
        assert sorted_rows(rt.read_arrow("by_city", 0)) == [
            ("Oslo", Decimal("5.25"), at(9), {"first": 1, "day": day}, [("orders", 1)]),
            ("Rome", Decimal("2.50"), at(11), {"first": 3, "day": day}, [("orders", 1)]),
        ]
        assert rt.read_arrow("by_city", 2).schema.field("last").type == pa.timestamp("us", "UTC")


@pytest.mark.unit
def test_a_file_without_a_column_or_with_a_type_that_does_not_cast_is_left_to_spark(
    tmp_path: Path,
) -> None:
    schema = T.StructType([T.StructField("a", T.LongType()), T.StructField("b", T.StringType())])
    pq.write_table(pa.table({"a": [1]}), tmp_path / "narrow.parquet")
    pq.write_table(pa.table({"a": ["x"], "b": ["y"]}), tmp_path / "text.parquet")
    assert arrow_rows.table([str(tmp_path / "narrow.parquet")], schema) is None
    assert arrow_rows.table([str(tmp_path / "text.parquet")], schema) is None


@pytest.mark.unit
def test_files_are_read_by_name_in_the_columns_order_and_typed_as_spark_types_them(
    tmp_path: Path,
) -> None:
    schema = T.StructType(
        [T.StructField("when", T.TimestampType(), False), T.StructField("n", T.IntegerType())]
    )
    data = tmp_path / "attempt"
    data.mkdir()
    naive = pa.array([dt.datetime(2026, 1, 1, 12)], pa.timestamp("ns"))  # as INT96 reads
    pq.write_table(pa.table({"n": pa.array([7], pa.int64()), "when": naive}), data / "a.parquet")
    pq.write_table(pa.table({"n": [8], "when": naive, "extra": [0]}), data / "b.parquet")
    read = arrow_rows.table([str(data)], schema)
    assert read is not None
    assert read.schema == pa.schema(
        [pa.field("when", pa.timestamp("us", "UTC")), pa.field("n", pa.int32())]
    )
    noon = dt.datetime(2026, 1, 1, 12, tzinfo=UTC)
    assert read.to_pylist() == [{"when": noon, "n": 7}, {"when": noon, "n": 8}]
    empty = arrow_rows.table([], schema)
    assert empty is not None
    assert (empty.num_rows, empty.schema) == (0, read.schema)
