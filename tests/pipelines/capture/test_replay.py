"""Replayed sources: captured streams fed into a pipeline on any number of workers, with the
same outputs as DuckDB SQL over the captured files, and a frontier held by the slowest stream."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines.capture import log as capture_log
from pipelines.errors import InputValidationError, PipelineDefinitionError
from pipelines.run.runtime import Runtime
from pipelines.stages.pipeline import Pipeline
from pipelines.testing import rows_of
from progress.capture import Messages
from progress.ledger import Ledger
from tests.fixtures.handmade_captures import Capture, advance, done, epochs, stream_rows

pytestmark = pytest.mark.spark


def per_account(df: DataFrame) -> DataFrame:
    return df.groupBy("account").agg(F.sum("amount").alias("amount"))


def replayed(directories: list[Path], workers: int) -> Pipeline:
    p = Pipeline("replayed")
    payments = p.replay("payments", directories, workers=workers)
    p.transform("totals", payments, fn=per_account)
    return p


def runtime(home: Path, spark: SparkSession, pipeline: Pipeline) -> Runtime:
    return Runtime(pipeline, Ledger(home / "ledger.duckdb"), spark, home / "data")


def three_streams(root: Path, **until: int) -> list[Path]:
    """Three captures of three epochs each; ``until={"s1": 2}`` stops stream 1 holding 2."""
    dirs = [root / f"s{i}" for i in range(3)]
    for i, d in enumerate(dirs):
        epochs(Capture(d), stream_rows(i), until=until.get(d.name))
    return dirs


def oracle(dirs: list[Path], epoch: int) -> set[tuple[str, int]]:
    """Per account, the sum of the captured rows at ``epoch`` (DuckDB over the raw files)."""
    files = [
        str(d / f.path)
        for d in dirs
        for e in capture_log.read(d).events
        if isinstance(e, Messages) and e.time == epoch
        for f in e.files
    ]
    rows = duckdb.sql(
        f"SELECT account, sum(amount)::BIGINT FROM read_parquet({files!r}) GROUP BY account"
    ).fetchall()
    return {(a, int(n)) for a, n in rows}


def test_the_schema_comes_from_the_captures_and_bad_directories_are_refused(
    tmp_path: Path,
) -> None:
    (d,) = three_streams(tmp_path)[:1]
    p = Pipeline("p")
    p.replay("payments", d)
    assert p.columns("payments") == ("account", "amount")
    with pytest.raises(PipelineDefinitionError, match=r"no capture directory .*missing"):
        Pipeline("p").replay("payments", [d, tmp_path / "missing"])
    other = tmp_path / "other"
    Capture(other, schema=T.StructType([T.StructField("account", T.IntegerType())]))
    with pytest.raises(PipelineDefinitionError) as err:
        Pipeline("p").replay("payments", [d, other], workers=2)
    assert "account string, amount bigint" in str(err.value)
    assert f"{other} has account int" in str(err.value)
    (tmp_path / "empty").mkdir()
    with pytest.raises(PipelineDefinitionError, match="holds no capture"):
        Pipeline("p").replay("payments", tmp_path / "empty")


def test_three_streams_on_one_two_and_five_workers_give_the_same_outputs(
    tmp_path: Path, spark: SparkSession
) -> None:
    dirs = three_streams(tmp_path / "captures")
    for workers in (1, 2, 5):
        rt = runtime(tmp_path / f"w{workers}", spark, replayed(dirs, workers))
        results = rt.run()
        assert {(r.stage, r.epoch) for r in results} == {("totals", e) for e in range(3)}
        for epoch in range(3):
            assert set(rows_of(rt, "totals", epoch)) == oracle(dirs, epoch), workers
        status = {s.stage: s for s in rt.status()}
        assert list(status["totals"].done) == [0, 1, 2]
        assert rt.replay() == 0  # nothing new: nothing fed twice
        assert rt.ledger.worker_time("replayed", "payments", workers - 1) is None


def test_the_frontier_passes_an_epoch_only_after_every_stream_released_it(
    tmp_path: Path, spark: SparkSession
) -> None:
    dirs = three_streams(tmp_path / "captures", s1=1)  # stream 1 still holds epoch 1
    rt = runtime(tmp_path / "home", spark, replayed(dirs, 2))
    rt.run()
    assert rt.ledger.done_epochs("replayed", "totals") == [0]
    # stream 1 is on worker 1 (1 % 2); its messages at 1 and 2 (of streams 0 and 2) wait
    assert rt.blockers("totals", 1) == ["source payments, worker 1, still holds epoch 1"]
    lagging = Capture.__new__(Capture)
    lagging.directory = dirs[1]
    rows = stream_rows(1)
    lagging.add(lagging.messages(1, rows[1]), advance(1, 2))
    rt.run()
    assert rt.ledger.done_epochs("replayed", "totals") == [0, 1]
    assert rt.blockers("totals", 2) == ["source payments, worker 1, still holds epoch 2"]
    lagging.add(lagging.messages(2, rows[2]), advance(2, 3), done(3))
    rt.run()
    assert rt.ledger.done_epochs("replayed", "totals") == [0, 1, 2]
    for epoch in range(3):
        assert set(rows_of(rt, "totals", epoch)) == oracle(dirs, epoch)


def test_messages_ahead_of_progress_and_a_revision_replace_only_their_stream(
    tmp_path: Path, spark: SparkSession
) -> None:
    a, b = Capture(tmp_path / "a"), Capture(tmp_path / "b")
    # stream a sends at 0, 1 and 2 before it releases anything (messages earlier, progress
    # later, as the protocol allows), then releases all at once
    a.add(a.messages(0, [("x", 1)]), a.messages(2, [("x", 5)]), a.messages(1, [("y", 2)]))
    b.add(b.messages(0, [("x", 10)]), advance(0, 1), b.messages(1, [("y", 20)]), advance(1, 2))
    rt = runtime(tmp_path / "home", spark, replayed([a.directory, b.directory], 1))
    assert rt.replay() == 7
    rt.run()
    assert rt.ledger.done_epochs("replayed", "totals") == []  # stream a still holds 0
    a.add(advance(0, 2))
    rt.run()
    assert rt.ledger.done_epochs("replayed", "totals") == [0, 1]
    assert set(rows_of(rt, "totals", 0)) == {("x", 11)}
    a.add(a.revision(0, [("x", 100), ("z", 3)]))  # replaces a's message at 0, not b's
    rt.run()
    assert set(rows_of(rt, "totals", 0)) == {("x", 110), ("z", 3)}
    assert set(rows_of(rt, "totals", 1)) == {("y", 22)}
    a.add(done(2))
    b.add(b.messages(2, []), done(2))  # an empty message
    rt.run()
    assert set(rows_of(rt, "totals", 2)) == {("x", 5)}
    assert rt.ledger.worker_time("replayed", "payments", 0) is None


def test_a_replayed_source_takes_no_send(tmp_path: Path, spark: SparkSession) -> None:
    dirs = three_streams(tmp_path / "captures")
    rt = runtime(tmp_path / "home", spark, replayed(dirs, 1))
    with pytest.raises(InputValidationError, match="replayed source"):
        rt.input("payments", 0)


def test_data_files_are_linked_not_rewritten(tmp_path: Path, spark: SparkSession) -> None:
    dirs = three_streams(tmp_path / "captures")
    rt = runtime(tmp_path / "home", spark, replayed(dirs, 1))
    rt.replay()
    (message,) = [m for m in rt.ledger.message("replayed", "payments", 0, 0) if m.path][:1]
    assert message.path is not None
    (part,) = Path(message.path).glob("*.parquet")
    captured = capture_log.read(dirs[0]).events[0]
    assert isinstance(captured, Messages)
    assert part.stat().st_ino == (dirs[0] / captured.files[0].path).stat().st_ino
