"""What a stage run gives Spark to read its inputs by: the very files Spark reads from the
message directories."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from pipelines.run.work import read_files

pytestmark = pytest.mark.spark


def test_the_files_named_are_those_spark_reads_from_the_directories(
    tmp_path: Path, spark: SparkSession
) -> None:
    written = tmp_path / "written"  # as Spark's writer leaves a message: parts, marker, checksums
    spark.range(6).repartition(2).write.parquet(str(written))
    assert (written / "_SUCCESS").exists()
    assert list(written.glob(".*.crc"))
    linked = tmp_path / "linked"  # as a send or a sink leaves one: a file, and hidden leftovers
    linked.mkdir()
    table = pa.table({"id": [7, 8]})
    pq.write_table(table, linked / "part-00000.parquet")
    pq.write_table(table, linked / ".part-00001.parquet.tmp.parquet")
    pq.write_table(table, linked / "_part-00002.parquet")
    paths = [str(written), str(linked)]

    named = read_files(paths)

    assert sorted(named) == sorted(
        urlparse(f).path for f in spark.read.parquet(*paths).inputFiles()
    )
    assert len(named) == 3
    rows = sorted(r.id for r in spark.read.parquet(*named).collect())
    assert (
        rows
        == sorted(r.id for r in spark.read.parquet(*paths).collect())
        == [0, 1, 2, 3, 4, 5, 7, 8]
    )


def test_a_directory_without_a_file_is_left_for_spark_to_name(tmp_path: Path) -> None:
    empty = tmp_path / "gone"
    empty.mkdir()
    assert read_files([str(empty)]) == [str(empty)]
    assert read_files([str(tmp_path / "missing")]) == [str(tmp_path / "missing")]
