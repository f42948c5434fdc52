"""Iceberg sinks, against the DuckDB oracle and read by two engines (pyiceberg's scan, DuckDB
over the table's data files): one table commit per published epoch with the attempt in its
snapshot summary, the attempt's files taken as they are (INT96 timestamps written again), a
revision replacing its epoch's rows (an older snapshot shows the old ones), exactly once across
kills before and after the table commit, a table that gains columns and refuses to lose one,
and the definition checks."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog import load_catalog
from pyiceberg.table import Table
from pyspark.sql import SparkSession

from pipelines.errors import PipelineDefinitionError
from pipelines.run.iceberg_sink import IcebergSink, resolved
from pipelines.run.published import Committed
from pipelines.run.runtime import Runtime
from pipelines.stages.pipeline import Pipeline
from progress.ledger import Ledger
from tests.fixtures.exports import CATALOG, SALES, TABLE, oracle, pipeline, send, write_input
from tests.pipelines.run.test_delta_sink import (
    hive_rows,
    killed_at,
    shrink_refused,
    with_share,
    without_total,
)

pytestmark = pytest.mark.spark

Row = tuple[int, str, float]


def iceberg_runtime(home: Path, spark: SparkSession, fn=None) -> Runtime:  # type: ignore[no-untyped-def]
    sales = pipeline("iceberg") if fn is None else pipeline("iceberg", fn)
    return Runtime(sales, Ledger(home / "ledger.duckdb"), spark, home / "data")


def table(home: Path) -> Table:
    return load_catalog("default", **resolved(CATALOG, home)).load_table(TABLE)


def scanned(home: Path, snapshot: int | None = None) -> list[Row]:
    """The table's rows through pyiceberg, ``(epoch, item, total)``."""
    rows = table(home).scan(snapshot_id=snapshot).to_arrow().to_pylist()
    return sorted((r["epoch"], r["item"], round(r["total"], 6)) for r in rows)


def duckdb_rows(home: Path) -> list[Row]:
    """DuckDB over the data files of the table's current snapshot (the epoch from their
    ``epoch=N`` folders: the attempt's files, taken as they are, have no such column)."""
    return hive_rows(
        [t.file.file_path.removeprefix("file://") for t in table(home).scan().plan_files()]
    )


def published(home: Path) -> list[tuple[str, str]]:
    """Each snapshot's epoch and attempt (its summary), oldest first; an overwrite's delete
    and append of one transaction count once."""
    seen: list[tuple[str, str]] = []
    for snapshot in sorted(table(home).snapshots(), key=lambda s: s.sequence_number):
        props = snapshot.summary.additional_properties if snapshot.summary else {}
        if "epochgate.epoch" in props:
            found = (props["epochgate.epoch"], props["epochgate.attempt"])
            if not seen or seen[-1] != found:
                seen.append(found)
    return seen


def sent(tmp_path: Path, spark: SparkSession, epochs: int) -> tuple[Runtime, dict[int, Path]]:
    files = {e: write_input(tmp_path / "raw", e) for e in range(epochs)}
    rt = iceberg_runtime(tmp_path / "home", spark)
    send(rt, files)
    rt.run()
    return rt, files


def test_each_epoch_is_one_table_commit_read_alike_by_two_engines(
    tmp_path: Path, spark: SparkSession
) -> None:
    rt, files = sent(tmp_path, spark, 3)
    home = tmp_path / "home"
    assert (home / "lake" / "catalog.db").is_file()  # the catalog's paths are under the home
    want = oracle(files)
    assert scanned(home) == want
    assert duckdb_rows(home) == want
    attempts = {m.time: m.attempt for m in rt.ledger.messages("sales", "export", 0)}
    assert published(home) == [(str(e), attempts[e]) for e in range(3)]
    assert rt.publish_sinks() == []
    (state,) = rt.sinks()
    assert (state.format.value, state.location) == ("iceberg", "sales.totals (sql catalog)")
    assert (state.published, state.committed, state.last_published) == (3, 3, 2)
    assert state.version == table(home).current_snapshot().sequence_number  # type: ignore[union-attr]


def test_a_revision_replaces_its_epoch_and_an_older_snapshot_shows_the_old_rows(
    tmp_path: Path, spark: SparkSession
) -> None:
    rt, files = sent(tmp_path, spark, 2)
    home = tmp_path / "home"
    before = table(home).current_snapshot()
    assert before is not None
    fixed = write_input(tmp_path / "fixed", 5)
    rt.input("sales").correct(1, fixed)
    rt.run()
    assert scanned(home) == oracle({0: files[0], 1: fixed})
    assert scanned(home, before.snapshot_id) == oracle(files)
    assert [epoch for epoch, _ in published(home)] == ["0", "1", "1"]


@pytest.mark.parametrize("point", ["publish", "written", "table"])
def test_a_kill_before_inside_or_after_the_table_commit_publishes_once(
    tmp_path: Path, spark: SparkSession, point: str
) -> None:
    home = tmp_path / "home"
    rt, files = killed_at(tmp_path, iceberg_runtime(home, spark), point, "iceberg")
    assert [e for e, _ in published(home)] == (["0", "1"] if point == "table" else ["0"])
    folder = Path(table(home).location().removeprefix("file://")) / "data" / "epoch=1"
    left = sorted(p.name for p in folder.glob("*.parquet"))
    assert bool(left) == (point != "publish")  # a killed write leaves its links, uncommitted
    assert rt.publish_sinks() == ([] if point == "table" else [("export", 1)])
    assert [e for e, _ in published(home)] == ["0", "1"]
    assert scanned(home) == oracle(files)
    taken = sorted(
        Path(t.file.file_path).name for t in table(home).scan(row_filter="epoch = 1").plan_files()
    )
    assert taken == sorted(p.name for p in folder.glob("*.parquet"))
    assert not left or taken == left  # the links a killed write left are the ones taken


def test_a_table_gains_columns_and_refuses_to_lose_one(tmp_path: Path, spark: SparkSession) -> None:
    _, files = sent(tmp_path, spark, 2)
    home = tmp_path / "home"
    grown = iceberg_runtime(home, spark, with_share)
    grown.revise("totals", [1])
    grown.run()
    rows = table(home).scan().to_arrow().to_pylist()
    assert {r["epoch"]: r["share"] for r in rows} == {0: None, 1: 0.5}
    assert scanned(home) == oracle(files)
    snapshot = table(home).current_snapshot()
    cause = shrink_refused(iceberg_runtime(home, spark, without_total))
    assert "of the table are gone" in cause
    assert "total" in cause
    assert table(home).current_snapshot() == snapshot  # nothing was committed to the table


@pytest.mark.unit
def test_files_are_taken_as_they_are_and_int96_timestamps_written_again(tmp_path: Path) -> None:
    """The attempt's files become the table's (hard links, the epoch their partition value, one
    snapshot replacing the epoch's files); Spark's legacy INT96 timestamps, which Iceberg
    readers need not read, are written again in microseconds."""
    when = datetime(2026, 11, 28, 12, 30, tzinfo=UTC)
    rows = pa.table({"k": pa.array([1, 2], pa.int64()), "at": pa.array([when, when])})

    def attempt(name: str, legacy: bool = False) -> Path:
        files = tmp_path / name
        files.mkdir()
        pq.write_table(rows, files / "part-0.parquet", use_deprecated_int96_timestamps=legacy)
        return files

    sink = IcebergSink("p", "ice", tmp_path, "ns.taken", CATALOG)
    for epoch, files in ((0, attempt("a0")), (1, attempt("a1")), (1, attempt("a1b"))):
        sink.publish(Committed(epoch, files.name, epoch + len(files.name), files))
    taken = load_catalog("default", **resolved(CATALOG, tmp_path)).load_table("ns.taken")
    read = taken.scan().to_arrow().to_pylist()
    assert sorted((r["epoch"], r["k"], r["at"]) for r in read) == [
        (e, k, when) for e in (0, 1) for k in (1, 2)
    ]
    paths = sorted(
        Path(t.file.file_path.removeprefix("file://")) for t in taken.scan().plan_files()
    )
    assert [(p.parent.name, p.name) for p in paths] == [
        ("epoch=0", "a0-part-0.parquet"),
        ("epoch=1", "a1b-part-0.parquet"),
    ]
    assert [p.stat().st_ino for p in paths] == [
        (tmp_path / a / "part-0.parquet").stat().st_ino for a in ("a0", "a1b")
    ]
    operations = [s.summary.operation.value for s in taken.snapshots() if s.summary]
    assert operations == ["append", "overwrite", "overwrite"]  # one snapshot per publish

    legacy = IcebergSink("p", "ice", tmp_path, "ns.legacy", CATALOG)
    legacy.publish(Committed(0, "old", 1, attempt("old", legacy=True)))
    written = load_catalog("default", **resolved(CATALOG, tmp_path)).load_table("ns.legacy")
    assert [(r["k"], r["at"]) for r in written.scan().to_arrow().to_pylist()] == [
        (1, when.replace(tzinfo=None)),
        (2, when.replace(tzinfo=None)),
    ]
    (task,) = written.scan().plan_files()
    assert pq.read_schema(task.file.file_path.removeprefix("file://")).field("at").type == (
        pa.timestamp("us")
    )


@pytest.mark.unit
def test_an_iceberg_sink_needs_a_table_and_a_catalog() -> None:
    p = Pipeline("lake")
    src = p.source("src", schema=SALES)

    def refused(**kwargs: object) -> PipelineDefinitionError:
        with pytest.raises(PipelineDefinitionError) as raised:
            p.sink("ice", src, format="iceberg", **kwargs)  # type: ignore[arg-type]
        return raised.value

    assert refused(table="nonamespace", catalog=CATALOG).argument == "table"
    assert refused(table="sales.totals").argument == "catalog"
    assert refused(table="sales.totals", catalog={"uri": "x"}).argument == "catalog"
    assert refused(path="out", table="sales.totals", catalog=CATALOG).argument == "path"
    with pytest.raises(PipelineDefinitionError) as raised:
        p.sink("pq", src, table="sales.totals")
    assert raised.value.argument == "table"
    p.sink("ice", src, format="iceberg", table="sales.totals", catalog=CATALOG)
    assert p.stage("ice").summary().endswith("the iceberg table sales.totals")
