"""What footers tell without Spark: whether a message's files have one file schema."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pipelines.spark.footers import one_file_schema


def message(root: Path, name: str, *tables: pa.Table) -> Path:
    path = root / name
    path.mkdir()
    for i, table in enumerate(tables):
        pq.write_table(table, path / f"part-{i:05d}.parquet")
    return path


def test_files_of_one_schema_across_messages_have_one_file_schema(tmp_path: Path) -> None:
    a = pa.table({"k": [1, 2], "v": ["x", "y"]})
    b = pa.table({"k": [3], "v": ["z"]}).replace_schema_metadata({"writer": "another"})
    first = message(tmp_path, "first", a, b)
    second = message(tmp_path, "second", b)
    assert one_file_schema([first, second])


def test_another_type_order_nullability_or_no_file_is_not_one_file_schema(
    tmp_path: Path,
) -> None:
    base = pa.table({"k": [1], "v": ["x"]})
    other_type = pa.table({"k": pa.array([1], pa.int32()), "v": ["x"]})
    other_order = pa.table({"v": ["x"], "k": [1]})
    required = pa.schema([pa.field("k", pa.int64(), nullable=False), pa.field("v", pa.string())])
    not_null = pa.table({"k": [1], "v": ["x"]}, schema=required)
    kept = message(tmp_path, "kept", base)
    for i, other in enumerate((other_type, other_order, not_null)):
        assert not one_file_schema([kept, message(tmp_path, f"other{i}", other)])
        assert not one_file_schema([message(tmp_path, f"mixed{i}", base, other)])
    empty = tmp_path / "empty"
    empty.mkdir()
    assert not one_file_schema([kept, empty])
    assert not one_file_schema([])
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "part-00000.parquet").write_bytes(b"not parquet")
    assert not one_file_schema([kept, broken])
