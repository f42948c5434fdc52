"""Transforms that are not materialized (``materialize=False``): recomputed inside the stages
that read them, with the same results, the same lineage and exactly-once revisions."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import types as T

from pipelines.errors import PipelineDefinitionError
from pipelines.examples import bank
from pipelines.examples.bank_data import DemoData, Oracle, generate
from pipelines.examples.demo import verify_outputs
from pipelines.run.executor import Admitted
from pipelines.run.runtime import Runtime
from pipelines.stages.pipeline import Pipeline
from progress.errors import CaptureError
from progress.ledger import Ledger
from progress.run_status import RunStatus
from tests.fixtures.exports import assert_hard_links

NUMBERS = T.StructType([T.StructField("n", T.LongType()), T.StructField("k", T.LongType())])
STATE = T.StructType([T.StructField("k", T.LongType()), T.StructField("total", T.LongType())])


def feed(rt: Runtime, data: DemoData) -> None:
    for epoch in range(data.epochs):
        for source, workers in bank.WORKERS.items():
            for w in range(workers):
                for path in data.files(source, epoch, w):
                    rt.input(source, w).send(path)
                rt.input(source, w).advance_to(epoch + 1)


@pytest.mark.spark
@pytest.mark.parametrize("materialize", [True, False])
def test_bank_matches_the_oracle_with_or_without_written_validations(
    tmp_path: Path, spark: SparkSession, materialize: bool
) -> None:
    data = generate(tmp_path / "inputs", epochs=2, rows=300, accounts=40, seed=3)
    ledger = Ledger(tmp_path / "ledger.duckdb")
    pipeline = bank.pipeline(rings=False, materialize=materialize)
    rt = Runtime(pipeline, ledger, spark, tmp_path / "data")
    feed(rt, data)
    rt.run()
    oracle = Oracle(tmp_path / "inputs")
    assert verify_outputs(rt, oracle, 2) == []
    cards = ledger.message("bank", "valid_cards", 0, 1)
    assert [m.path is None for m in cards] == [not materialize]  # written, or not
    # Lineage: what movements read names the validations' messages, and, when they are not
    # written, the sources' messages they were computed from.
    read = {ref.stage for ref in ledger.reads("bank", "movements", 1)}
    assert {"valid_cards", "valid_wires"} <= read
    assert ({"card_payments", "wire_transfers"} <= read) == (not materialize)
    if materialize:
        return
    # A revision of a transform not materialized makes its readers stale; they re-run once, and
    # every output still equals the oracle (nothing counted twice).
    rt.revise("valid_cards", [0])
    assert ("movements", 0) in rt.stale()
    rerun = rt.run()
    assert ("movements", 0) in {(r.stage, r.epoch) for r in rerun}
    assert rt.stale() == []
    assert verify_outputs(rt, oracle, 2) == []


@pytest.mark.unit
def test_a_keyed_stage_cannot_read_a_transform_that_is_not_materialized() -> None:
    p = Pipeline("refused")
    numbers = p.source("numbers", schema=NUMBERS)
    doubled = p.transform("doubled", numbers, fn=lambda df: df, materialize=False)
    with pytest.raises(PipelineDefinitionError, match="'totals' reads transform 'doubled'") as e:
        p.stateful("totals", doubled, key=["k"], schema=STATE, update=lambda b, s: s)
    assert e.value.stage == "totals"
    with pytest.raises(PipelineDefinitionError, match="not materialized") as e:
        p.aggregate("sums", doubled, key=["k"], aggs={"total": ("sum", "n")})
    assert e.value.stage == "sums"
    with pytest.raises(PipelineDefinitionError, match="a delayed transform is materialized") as e:
        p.transform("later", numbers, fn=lambda df: df, delay=1, materialize=False)
    assert (e.value.stage, e.value.argument) == ("later", "materialize")
    p.transform("kept", doubled, fn=lambda df: df)  # a transform may read it
    p.sink("out", doubled, path="out")  # and so may a sink: it writes what it reads


@pytest.mark.spark
def test_a_transform_that_is_not_materialized_cannot_be_captured(
    tmp_path: Path, spark: SparkSession
) -> None:
    p = Pipeline("captured")
    numbers = p.source("numbers", schema=NUMBERS)
    p.transform("doubled", numbers, fn=lambda df: df, materialize=False)
    rt = Runtime(p, Ledger(tmp_path / "ledger.duckdb"), spark, tmp_path / "data")
    with pytest.raises(CaptureError, match="not materialized") as e:
        rt.capture("doubled", tmp_path / "capture")
    assert e.value.stage == "doubled"
    assert not (tmp_path / "capture").exists()


ORDERS = T.StructType(
    [T.StructField("order_id", T.LongType()), T.StructField("cents", T.LongType())]
)
PAYMENTS = T.StructType(
    [T.StructField("order_id", T.LongType()), T.StructField("paid", T.LongType())]
)


def joined_pipeline() -> Pipeline:
    """Orders joined with payments, not written, then summed per epoch (written)."""
    from pyspark.sql import functions as F

    p = Pipeline("paid")
    orders = p.source("orders", schema=ORDERS)
    payments = p.source("payments", schema=PAYMENTS, workers=2)
    both = p.join("both", orders, payments, on=["order_id"], materialize=False)
    big = p.transform("big", both, fn=lambda df: df.where("cents >= 10"), materialize=False)
    p.transform(
        "sums", big, fn=lambda df: df.agg(F.count("*").alias("n"), F.sum("paid").alias("paid"))
    )
    return p


def send_joined(rt: Runtime, files: Path) -> Path:
    """Two epochs of orders and of payments (two workers) written to ``files`` and sent."""
    import duckdb

    files.mkdir()
    for epoch in range(2):
        sql = {
            "orders": f"SELECT i::BIGINT AS order_id, (i * 7 % 23)::BIGINT AS cents "
            f"FROM range({epoch * 10}, {epoch * 10 + 30}) t(i)",
            "payments0": f"SELECT i::BIGINT AS order_id, (i + {epoch})::BIGINT AS paid "
            f"FROM range({epoch * 10}, {epoch * 10 + 15}) t(i)",
            "payments1": f"SELECT i::BIGINT AS order_id, (2 * i)::BIGINT AS paid "
            f"FROM range({epoch * 10 + 15}, {epoch * 10 + 40}) t(i)",
        }
        for name, query in sql.items():
            duckdb.sql(f"COPY ({query}) TO '{files}/{name}-{epoch}.parquet' (FORMAT parquet)")
        for source, worker, name in [
            ("orders", 0, "orders"),
            ("payments", 0, "payments0"),
            ("payments", 1, "payments1"),
        ]:
            rt.input(source, worker).send(files / f"{name}-{epoch}.parquet")
            rt.input(source, worker).advance_to(epoch + 1)
    return files


@pytest.mark.spark
def test_a_join_that_is_not_materialized_is_joined_inside_its_reader(
    tmp_path: Path, spark: SparkSession
) -> None:
    import duckdb

    rt = Runtime(joined_pipeline(), Ledger(tmp_path / "ledger.duckdb"), spark, tmp_path / "data")
    files = send_joined(rt, tmp_path / "inputs")
    rt.run()
    ledger = rt.ledger
    for epoch in range(2):
        joined = (
            f"'{files}/orders-{epoch}.parquet' o JOIN (SELECT * FROM "
            f"'{files}/payments0-{epoch}.parquet' UNION ALL SELECT * FROM "
            f"'{files}/payments1-{epoch}.parquet') p USING (order_id)"
        )
        n, paid, everything = duckdb.sql(
            f"SELECT count(*) FILTER (cents >= 10), sum(paid) FILTER (cents >= 10), count(*) "
            f"FROM {joined}"
        ).fetchall()[0]
        row = rt.read("sums", epoch).collect()[0]
        assert (row["n"], row["paid"]) == (n, paid)
        # The join wrote nothing (its message holds no data); read, it is computed as its
        # readers compute it.
        assert [m.path for m in ledger.message("paid", "both", 0, epoch)] == [None]
        assert rt.read("both", epoch).count() == everything
        # Lineage: the reader read the join's and the transform's messages and both sources'.
        read = {ref.stage for ref in ledger.reads("paid", "sums", epoch)}
        assert read == {"both", "big", "orders", "payments"}
    assert not list((tmp_path / "data" / "paid").glob("both/**/attempt=*"))
    # A revision of the join makes its readers stale (the transform not materialized and the
    # stage that reads through it); each re-runs once, with the same result.
    before = rt.read("sums", 0).collect()
    rt.revise("both", [0])
    assert rt.stale() == [("big", 0), ("sums", 0)]
    assert [(r.stage, r.epoch) for r in rt.run()] == [("big", 0), ("sums", 0)]
    assert rt.stale() == []
    assert rt.read("sums", 0).collect() == before


@pytest.mark.unit
def test_a_keyed_stage_cannot_read_a_join_that_is_not_materialized() -> None:
    p = Pipeline("refused")
    orders = p.source("orders", schema=ORDERS)
    payments = p.source("payments", schema=PAYMENTS)
    both = p.join("both", orders, payments, on=["order_id"], materialize=False)
    with pytest.raises(PipelineDefinitionError, match="'sums' reads join 'both'") as e:
        p.aggregate("sums", both, key=["order_id"], aggs={"paid": ("sum", "paid")})
    assert e.value.stage == "sums"
    with pytest.raises(PipelineDefinitionError, match="materialize must be True or False") as e:
        p.join("again", orders, payments, on=["order_id"], materialize="no")  # type: ignore[arg-type]
    assert (e.value.stage, e.value.argument) == ("again", "materialize")


@pytest.mark.spark
def test_runs_that_are_bookkeeping_alone_commit_in_the_transaction_that_admits_them(
    tmp_path: Path, spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stage that is not materialized and a sink that links its input's files do no work of
    their own: each is worked and committed in the ledger transaction that admits it (the one
    that committed the run before it, if any), which then admits the next
    (``Executor.instant``), and its run record is one finished row; what they commit is the
    same."""
    from contextlib import contextmanager

    from progress.ledger.sessions import Session, Sessions

    p = joined_pipeline()
    p.sink("export", "sums", path="export")
    rt = Runtime(p, Ledger(tmp_path / "ledger.duckdb"), spark, tmp_path / "data")
    send_joined(rt, tmp_path / "inputs")
    outermost: list[int] = []
    transaction = Sessions.transaction

    @contextmanager
    def counted(self: Sessions) -> Iterator[Session]:
        if not self._in_transaction:
            outermost.append(1)
        with transaction(self) as s:
            yield s

    monkeypatch.setattr(Sessions, "transaction", counted)
    ran = [(r.stage, r.epoch) for r in rt.run()]
    stages = ["both", "big", "sums", "export"]
    assert ran == [(stage, epoch) for epoch in (0, 1) for stage in stages]
    # One transaction admits sums at epoch 0 with the instant runs before it, then one per run
    # of sums (whose work is a Spark job) commits it with the instant runs that follow.
    assert len(outermost) == 3  # 9 without instant runs
    for stage in ("both", "big", "export"):
        for epoch in (0, 1):
            runs = rt.ledger.history("paid", stage, epoch).runs
            assert [r.status for r in runs] == [RunStatus.SUCCEEDED]
            assert runs[0].finished_at is not None
            assert runs[0].batch_id is not None
    for epoch in (0, 1):
        assert_hard_links(rt.ledger, "paid", "export", "sums", epoch)
        assert [m.path for m in rt.ledger.message("paid", "both", 0, epoch)] == [None]
    assert [(s.published, s.last_published) for s in rt.sinks()] == [(2, 1)]
    assert rt.run() == []


@pytest.mark.spark
def test_a_run_knows_the_columns_of_what_it_reads_as_the_engine_does(
    tmp_path: Path, spark: SparkSession
) -> None:
    """The columns a run reads its inputs with, known without asking the engine, are those of
    the frames Spark reads (a join checks its ``on`` columns with them: on Spark Connect,
    asking a frame for its columns is a round trip to the server); an input recomputed in the
    run has none known."""
    p = joined_pipeline()
    p.join("written", "orders", "payments", on=["order_id"])
    rt = Runtime(p, Ledger(tmp_path / "ledger.duckdb"), spark, tmp_path / "data")
    send_joined(rt, tmp_path / "inputs")
    for stage in ("both", "big"):
        rt.run_stage(stage, 0)
    with rt.ledger.session():
        written = rt.executor.admit("written", 0)
        sums = rt.executor.admit("sums", 0)
    assert isinstance(written, Admitted)
    assert isinstance(sums, Admitted)
    read = [tuple(frame.columns) for frame in written.work.frames]
    assert written.work.columns == read == [("order_id", "cents"), ("order_id", "paid")]
    assert sums.work.columns == [None]
    assert sums.work.frames[0].columns == ["order_id", "cents", "paid"]
