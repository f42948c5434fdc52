"""Delta sinks, against the DuckDB oracle and read by three engines (deltalake with pyarrow,
Polars, DuckDB over the table's data files): one table commit per published epoch with the
attempt in its commit info, a revision replacing its epoch's rows (time travel shows the old
ones), exactly once across kills before and after the table commit, a table that gains columns
and refuses to lose one, and the definition checks."""

from __future__ import annotations

import importlib.util
import json
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pipelines.errors import PipelineDefinitionError, RunFailedError
from pipelines.run import sinks
from pipelines.run.delta_sink import DeltaSink
from pipelines.run.published import Committed
from pipelines.run.runtime import Runtime
from pipelines.stages.pipeline import Pipeline
from progress.ledger import Ledger
from tests.fixtures.exports import (
    SALES,
    SINK_PATH,
    attempt_rows,
    catalog,
    commit_export,
    oracle,
    pipeline,
    send,
    totals,
    write_input,
)
from tests.pipelines.cli.places import on, run
from tests.pipelines.run.test_sinks import run_child

pytestmark = pytest.mark.spark

Row = tuple[int, str, float]


def table_rows(root: Path, version: int | None = None) -> list[Row]:
    """The table's rows through deltalake and pyarrow, ``(epoch, item, total)``."""
    table = DeltaTable(str(root), version=version).to_pyarrow_table()
    return sorted(
        (r["epoch"], r["item"], round(r["total"], 6))
        for r in table.select(["epoch", "item", "total"]).to_pylist()
    )


def polars_rows(root: Path) -> list[Row]:
    frame = pl.read_delta(str(root)).select("epoch", "item", "total")
    return sorted((e, i, round(t, 6)) for e, i, t in frame.iter_rows())


def duckdb_rows(root: Path) -> list[Row]:
    """DuckDB over the data files of the table's current version (its epoch from their path)."""
    return hive_rows(DeltaTable(str(root)).file_uris())


def hive_rows(files: list[str]) -> list[Row]:
    """``(epoch, item, total)`` of a table's data ``files`` read by DuckDB, the epoch from
    their ``epoch=N`` folders (a file taken as it is has no such column)."""
    con = duckdb.connect()
    found = con.execute(
        "SELECT epoch, item, round(total, 6) FROM read_parquet(?, hive_partitioning = true)",
        [files],
    ).fetchall()
    con.close()
    return sorted((int(e), i, t) for e, i, t in found)


def commits(root: Path) -> list[tuple[str, str]]:
    """Each table commit's epoch and attempt (its commit info), oldest first."""
    return [
        (h["epochgate.epoch"], h["epochgate.attempt"])
        for h in reversed(DeltaTable(str(root)).history())
        if "epochgate.epoch" in h
    ]


def delta_runtime(home: Path, spark: SparkSession, fn=totals) -> Runtime:  # type: ignore[no-untyped-def]
    return Runtime(pipeline("delta", fn), Ledger(home / "ledger.duckdb"), spark, home / "data")


def delta_pipeline() -> Pipeline:
    return pipeline("delta")


def published(
    tmp_path: Path, spark: SparkSession, epochs: int
) -> tuple[Runtime, dict[int, Path], Path]:
    """``epochs`` epochs sent to the Delta pipeline in ``tmp_path/home`` and run: its runtime,
    its input files, and its table's path."""
    files = {e: write_input(tmp_path / "raw", e) for e in range(epochs)}
    rt = delta_runtime(tmp_path / "home", spark)
    send(rt, files)
    rt.run()
    return rt, files, rt.sink_path("export")


def test_each_epoch_is_one_table_commit_read_alike_by_three_engines(
    tmp_path: Path, spark: SparkSession, capsys: pytest.CaptureFixture[str]
) -> None:
    rt, files, root = published(tmp_path, spark, 3)
    assert root == tmp_path / "home" / SINK_PATH
    want = oracle(files)
    assert table_rows(root) == want
    assert polars_rows(root) == want
    assert duckdb_rows(root) == want
    attempts = {m.time: m.attempt for m in rt.ledger.messages("sales", "export", 0)}
    assert commits(root) == [(str(e), attempts[e]) for e in range(3)]
    assert rt.publish_sinks() == []  # every epoch is shown: nothing is committed again
    assert len(commits(root)) == 3
    (state,) = rt.sinks()
    assert (state.sink, state.format.value, state.location) == ("export", "delta", str(root))
    assert (state.published, state.committed, state.last_published, state.version) == (3, 3, 2, 2)
    assert state.describe() == (
        f"export (delta) at {root}: 3 of 3 committed epochs published, the last 2, table version 2"
    )
    home = tmp_path / "home"
    where = on("tests.pipelines.run.test_delta_sink:delta_pipeline", home)
    code, out, _ = run(capsys, ["sinks", *where])
    assert code == 0
    assert out.splitlines()[1].split() == ["export", "delta", "3", "of", "3", "2", "2", str(root)]
    code, out, _ = run(capsys, ["sinks", "--json", *where])
    assert json.loads(out) == {
        "sink": "export",
        "format": "delta",
        "location": str(root),
        "published": 3,
        "committed": 3,
        "last_published": 2,
        "version": 2,
    }


def test_epochs_without_rows_before_the_table_are_published_once_it_exists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sinks, "MARK_AFTER", 2)  # a mark would move past two shown epochs
    ledger = catalog(tmp_path / "ledger.duckdb")
    sink = DeltaSink("sales", "export", tmp_path / "table")
    for epoch in range(3):
        commit_export(ledger, epoch, None)  # epochs without rows: nothing to show, no table
    assert sinks.publish_committed(ledger, "sales", [sink]) == []
    assert sink.reader() is None  # no table, so no mark
    commit_export(ledger, 3, attempt_rows(tmp_path / "a3", "tea", 2.5))
    assert sinks.publish_committed(ledger, "sales", [sink]) == [("export", 3)]  # the table
    published = sinks.publish_committed(ledger, "sales", [sink])  # then the epochs before it
    assert published == [("export", 0), ("export", 1), ("export", 2)]
    (state,) = sinks.sink_states(ledger, "sales", [sink])
    assert (state.published, state.committed) == (4, 4)
    assert table_rows(sink.root) == [(3, "tea", 2.5)]


def test_a_revision_replaces_its_epoch_and_time_travel_shows_the_old_rows(
    tmp_path: Path, spark: SparkSession
) -> None:
    rt, files, root = published(tmp_path, spark, 2)
    before = DeltaTable(str(root)).version()
    fixed = write_input(tmp_path / "fixed", 5)  # other rows, corrected into epoch 1
    rt.input("sales").correct(1, fixed)
    rt.run()
    want = oracle({0: files[0], 1: fixed})
    assert table_rows(root) == want
    assert polars_rows(root) == want
    assert table_rows(root, version=before) == oracle(files)  # the table's history keeps them
    assert [epoch for epoch, _ in commits(root)] == ["0", "1", "1"]


def killed_at(
    tmp_path: Path, rt: Runtime, point: str, sink_format: str
) -> tuple[Runtime, dict[int, Path]]:
    """Two epochs sent to ``rt`` (in ``tmp_path/home``), the sink's epoch 0 published, and
    its run at epoch 1 killed in a child at ``point``: before its publish (``publish``), with
    its files in the table's folder but no table commit (``written``), or just after its table
    commit (``table``)."""
    files = {e: write_input(tmp_path / "raw", e) for e in range(2)}
    send(rt, files)
    rt.run_stage("totals", 0)
    rt.run_stage("totals", 1)
    rt.run_stage("export", 0)
    run_child(tmp_path / "home", point, 1, sink_format)
    return rt, files


@pytest.mark.parametrize("point", ["publish", "written", "table"])
def test_a_kill_before_inside_or_after_the_table_commit_publishes_once(
    tmp_path: Path, spark: SparkSession, point: str
) -> None:
    rt, files = killed_at(tmp_path, delta_runtime(tmp_path / "home", spark), point, "delta")
    root = rt.sink_path("export")
    assert list(rt.ledger.done_epochs("sales", "export")) == [0, 1]  # the ledger committed 1
    shown = [epoch for epoch, _ in commits(root)]
    assert shown == (["0", "1"] if point == "table" else ["0"])
    left = sorted(p.name for p in (root / "epoch=1").glob("*.parquet"))
    assert bool(left) == (point != "publish")  # a killed write leaves its links, uncommitted
    published = rt.publish_sinks()
    assert published == ([] if point == "table" else [("export", 1)])
    assert [epoch for epoch, _ in commits(root)] == ["0", "1"]  # epoch 1 once, either way
    assert table_rows(root) == oracle(files)
    assert rt.publish_sinks() == []
    taken = sorted(Path(f).name for f in DeltaTable(str(root)).file_uris() if "epoch=1" in f)
    assert taken == sorted(p.name for p in (root / "epoch=1").glob("*.parquet"))
    assert not left or taken == left  # the links a killed write left are the ones taken


def shrink_refused(shrunk: Runtime) -> str:
    """Why the sink's run fails after a code change that drops a column, revised at epoch 0
    (its run is the one that fails, before its commit)."""
    shrunk.revise("totals", [0])
    with pytest.raises(RunFailedError) as raised:
        shrunk.run()
    (failure,) = raised.value.failures
    assert (failure.stage, failure.epoch) == ("export", 0)
    return failure.cause


def with_share(df: DataFrame) -> DataFrame:
    return totals(df).withColumn("share", F.lit(0.5))


def without_total(df: DataFrame) -> DataFrame:
    return totals(df).drop("total").withColumn("total_cents", F.lit(1))


def test_a_table_gains_columns_and_refuses_to_lose_one(tmp_path: Path, spark: SparkSession) -> None:
    home = tmp_path / "home"
    _, files, root = published(tmp_path, spark, 2)
    grown = delta_runtime(home, spark, with_share)  # a code change, then its backfill
    grown.revise("totals", [1])
    grown.run()
    table = DeltaTable(str(root)).to_pyarrow_table()
    assert "share" in table.column_names
    shares = {r["epoch"]: r["share"] for r in table.to_pylist()}
    assert shares == {0: None, 1: 0.5}  # older epochs read the new column as null
    assert table_rows(root) == oracle(files)

    version = DeltaTable(str(root)).version()
    cause = shrink_refused(delta_runtime(home, spark, without_total))
    assert "column(s) total, share of the table are gone" in cause
    assert DeltaTable(str(root)).version() == version  # nothing was committed to the table
    assert table_rows(root) == oracle(files)


@pytest.mark.unit
def test_a_sink_format_is_checked_where_it_is_defined(monkeypatch: pytest.MonkeyPatch) -> None:
    p = Pipeline("lake")
    src = p.source("src", schema=SALES)
    with pytest.raises(PipelineDefinitionError) as raised:
        p.sink("out", src, path="out", format="orc")
    assert raised.value.argument == "format"
    assert "'parquet', 'delta', 'iceberg'" in raised.value.reason
    found = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name in ("deltalake", "pyiceberg") else found(name, *a),
    )
    with pytest.raises(PipelineDefinitionError) as missing:
        p.sink("lake", src, path="lake", format="delta")
    assert "pip install 'epochgate[delta]'" in missing.value.reason
    with pytest.raises(PipelineDefinitionError) as missing:
        p.sink("ice", src, format="iceberg", table="a.b", catalog={"type": "sql"})
    assert "pip install 'epochgate[iceberg]'" in missing.value.reason
    assert "lake" not in p.stages
    assert "ice" not in p.stages


@pytest.mark.unit
def test_files_with_int96_timestamps_are_written_again_and_others_taken_as_they_are(
    tmp_path: Path,
) -> None:
    """Spark's legacy INT96 timestamps are rewritten (Delta's readers need not read them);
    other files become the table's files as they are, hard links of the attempt's."""
    when = datetime(2026, 11, 28, 12, 30, tzinfo=UTC)
    rows = pa.table({"k": pa.array([1, 2], pa.int64()), "at": pa.array([when, when])})
    for epoch, legacy in ((0, True), (1, False)):
        files = tmp_path / f"attempt-{epoch}"
        files.mkdir()
        pq.write_table(rows, files / "part-0.parquet", use_deprecated_int96_timestamps=legacy)
        DeltaSink("p", "lake", tmp_path / "table").publish(Committed(epoch, f"a{epoch}", 1, files))
    table = DeltaTable(str(tmp_path / "table"))
    read = table.to_pyarrow_table().to_pylist()
    assert sorted((r["epoch"], r["k"], r["at"]) for r in read) == [
        (0, 1, when),
        (0, 2, when),
        (1, 1, when),
        (1, 2, when),
    ]
    taken = [Path(f) for f in table.file_uris() if "epoch=1" in f]
    assert [f.stat().st_ino for f in taken] == [
        (tmp_path / "attempt-1" / "part-0.parquet").stat().st_ino
    ]
    assert all(
        (tmp_path / "attempt-1" / "part-0.parquet").stat().st_ino != Path(f).stat().st_ino
        for f in table.file_uris()
        if "epoch=0" in f
    )
