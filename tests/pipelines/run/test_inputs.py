"""Bad input never corrupts: a clear error naming source, epoch, file and column; nothing saved."""

from __future__ import annotations

import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from pipelines.errors import InputValidationError
from pipelines.run.runtime import Runtime
from pipelines.spark import footers
from progress import ClosedHandleError, InvalidInputTimeError, TimeRegressionError, WorkerMovedError
from progress.ledger import CommitResult, Ledger, MessageEntry
from progress.timestamp import Time
from tests.fixtures.shop import ARROW, shop
from tests.pipelines.run.test_iterate import job_group

pytestmark = pytest.mark.spark


@pytest.fixture
def rt(tmp_path: Path, spark: SparkSession) -> Runtime:
    return Runtime(
        shop(tmp_path / "export"), Ledger(tmp_path / "l.duckdb"), spark, tmp_path / "data"
    )


def nothing_committed(rt: Runtime) -> None:
    assert rt.ledger.history("shop", "orders", 0).messages == ()
    assert rt.ledger.tracker("shop").pointstamps()[0][2] >= 1  # capabilities only
    assert not list((rt.store.root / "shop" / "orders").glob("**/*.parquet"))


def write(path: Path, table: pa.Table) -> Path:
    pq.write_table(table, path)
    return path


def orders_table(**overrides: object) -> pa.Table:
    data = {
        "order_id": [1, 2],
        "customer": ["ann", "bob"],
        "category": ["toys", "food"],
        "amount": [1.0, 2.0],
    }
    data.update(overrides)  # type: ignore[arg-type]
    return pa.table(data)


@pytest.mark.parametrize(
    ("table", "column", "reason"),
    [
        (orders_table(amount=["1", "2"]), "amount", "has type string, expected double"),
        (orders_table(order_id=[1, None]), "order_id", "null key"),
        (orders_table().drop_columns(["category"]), "category", "missing column"),
        (orders_table().append_column("extra", pa.array([1, 2])), "extra", "unexpected column"),
    ],
    ids=["wrong-type", "null-key", "missing-column", "extra-column"],
)
def test_bad_files_name_source_epoch_file_and_column(
    rt: Runtime, tmp_path: Path, table: pa.Table, column: str, reason: str
) -> None:
    path = write(tmp_path / "bad.parquet", table)
    with pytest.raises(InputValidationError) as err:
        rt.input("orders", 0).send(path)
    e = err.value
    assert (e.stage, e.epoch, e.file, e.column) == ("orders", 0, str(path), column)
    assert (e.pipeline, e.worker) == ("shop", 0)
    assert str(e).startswith("pipeline 'shop', source 'orders', worker 0, epoch 0, file ")
    assert reason in str(e)
    assert "nothing was committed" in str(e)
    nothing_committed(rt)


def test_a_corrupt_file_is_refused(rt: Runtime, tmp_path: Path) -> None:
    good = write(tmp_path / "good.parquet", orders_table().cast(ARROW["orders"]))
    corrupt = tmp_path / "corrupt.parquet"
    corrupt.write_bytes(good.read_bytes()[:40] + b"\x00garbage" * 20 + good.read_bytes()[-12:])
    with pytest.raises(InputValidationError) as err:
        rt.input("orders", 1).send(corrupt)
    assert err.value.file == str(corrupt)
    missing = tmp_path / "no" / ".." / "missing.parquet"
    with pytest.raises(InputValidationError, match="no such file"):
        rt.input("orders", 1).send(missing)
    nothing_committed(rt)


def test_a_dataframe_with_a_bad_column_names_it(rt: Runtime, spark: SparkSession) -> None:
    df = spark.createDataFrame(
        [(1, "ann", "toys", 5)], "order_id long, customer string, category string, amount int"
    )
    with pytest.raises(InputValidationError) as err:
        rt.input("orders", 0).send(df)
    assert (err.value.column, err.value.file) == ("amount", None)
    nothing_committed(rt)


def test_a_keyed_dataframe_is_checked_by_its_written_footers_not_a_job_of_its_own(
    rt: Runtime, spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its write is the send's only Spark job: the footers say the key holds no null, and
    count its rows, each footer read once."""
    df = spark.createDataFrame(
        [(1, "ann", "toys", 5.0), (2, "bob", "food", 1.0)],
        "order_id long, customer string, category string, amount double",
    )
    read: list[str] = []
    real = footers.pq.read_metadata
    monkeypatch.setattr(footers.pq, "read_metadata", lambda p: read.append(str(p)) or real(p))
    group = f"test-inputs-{uuid.uuid4().hex}"
    with job_group(spark, group):
        rt.input("orders", 0).send(df)
    assert len(spark.sparkContext.statusTracker().getJobIdsForGroup(group)) == 1
    message = rt.ledger.history("shop", "orders", 0).messages[0]
    assert message.rows == 2
    assert message.path is not None
    written = [str(part) for part in footers.parts(message.path)]
    assert written
    assert sorted(read) == written


@pytest.mark.parametrize("drop", [False, True], ids=["kept", "quarantined"])
def test_a_dataframe_with_a_null_key_is_refused_and_nothing_is_left(
    tmp_path: Path, spark: SparkSession, drop: bool
) -> None:
    """Also when a ``drop`` expectation would quarantine that row, and before a ``fail``
    expectation the row fails."""
    pipeline = shop(tmp_path / "export")
    if drop:
        pipeline.expect("orders", "known_customer", "customer <> 'nobody'", on_fail="drop")
    else:
        pipeline.expect("orders", "positive", "amount > 0", on_fail="fail")
    rt = Runtime(pipeline, Ledger(tmp_path / "l.duckdb"), spark, tmp_path / "data")
    df = spark.createDataFrame(
        [(1, "ann", "toys", 5.0), (None, "nobody", "food", -1.0)],
        "order_id long, customer string, category string, amount double",
    )
    with pytest.raises(InputValidationError) as err:
        rt.input("orders", 0).send(df)
    assert (err.value.column, err.value.reason) == ("order_id", "null key")
    nothing_committed(rt)
    assert not [path for path in rt.store.root.glob("**/*") if path.is_file()]


def test_a_closed_worker_refuses_data(rt: Runtime, tmp_path: Path) -> None:
    rt.input("refunds", 0).close()
    with pytest.raises(ClosedHandleError):
        rt.input("refunds", 0).send(tmp_path / "whatever.parquet")
    with pytest.raises(InputValidationError, match="no worker 5"):
        rt.input("orders", 5)


def test_a_fitting_file_is_copied_and_another_order_is_rewritten(
    rt: Runtime, tmp_path: Path
) -> None:
    fits = write(tmp_path / "fits.parquet", orders_table().cast(ARROW["orders"]))
    rt.input("orders", 0).send(fits)
    (message,) = rt.ledger.message("shop", "orders", 0, 0)
    copied = Path(message.path) / "part-00000.parquet"
    assert copied.read_bytes() == fits.read_bytes()
    assert message.rows == 2
    reordered = (
        orders_table().cast(ARROW["orders"]).select(["amount", "order_id", "customer", "category"])
    )
    rt.input("orders", 1).send(write(tmp_path / "reordered.parquet", reordered))
    got = sorted(
        tuple(r)
        for r in rt.spark.read.parquet(
            *[m.path for m in rt.ledger.message("shop", "orders", 0, 0)]
        ).collect()
    )
    assert got == sorted([(1, "ann", "toys", 1.0), (2, "bob", "food", 2.0)] * 2)


class AdvancedMeanwhile(Ledger):
    """A ledger whose worker another process advances between the check of the data and its
    commit (the hook stands where the other process would step in)."""

    def send(
        self,
        pipeline: str,
        node: str,
        worker: int,
        message: MessageEntry | None = None,
        *,
        key: str | None = None,
        port: int = 0,
        fresh: bool = False,
        advance_to: Time | None = None,
    ) -> CommitResult:
        assert message is not None
        Ledger(self.path).advance(pipeline, node, worker, message.time + 1, seal=True)  # type: ignore[operator]
        return super().send(
            pipeline, node, worker, message, key=key, port=port, fresh=fresh, advance_to=advance_to
        )


def test_a_send_is_refused_when_its_worker_moved_after_the_check(
    tmp_path: Path, spark: SparkSession
) -> None:
    ledger = AdvancedMeanwhile(tmp_path / "l.duckdb")
    rt = Runtime(shop(tmp_path / "export"), ledger, spark, tmp_path / "data")
    fits = write(tmp_path / "fits.parquet", orders_table().cast(ARROW["orders"]))
    with pytest.raises(WorkerMovedError) as err:
        rt.input("orders", 0).send(fits)
    e = err.value
    assert (e.pipeline, e.source, e.worker, e.checked, e.current) == ("shop", "orders", 0, 0, 1)
    assert "nothing was committed" in str(e)
    # Epoch 0 got only the empty message the advance sealed; epoch 1 nothing; no data left.
    assert [(m.path, m.rows) for m in ledger.message("shop", "orders", 0, 0)] == [(None, 0)]
    assert ledger.message("shop", "orders", 0, 1) == []
    assert not list((rt.store.root / "shop" / "orders").glob("**/*.parquet"))


def test_advance_and_close_follow_one_rule(rt: Runtime) -> None:
    handle = rt.input("orders", 1)
    assert not handle.advance_to(2).repeated
    assert handle.advance_to(2).repeated  # a retry of the same advance does nothing
    for epoch in (1, 0):
        with pytest.raises(TimeRegressionError) as err:
            handle.advance_to(epoch)
        assert (err.value.pipeline, err.value.source, err.value.worker) == ("shop", "orders", 1)
        assert (err.value.current, err.value.requested) == (2, epoch)
    for bad in ("3", -1):
        with pytest.raises(InvalidInputTimeError) as invalid:
            handle.advance_to(bad)  # type: ignore[arg-type]
        assert str(invalid.value).startswith(
            f"pipeline 'shop', source 'orders', worker 1, at epoch 2: {bad!r} is not an epoch"
        )
    assert not handle.close().repeated
    assert handle.close().repeated  # closing twice does nothing
    with pytest.raises(ClosedHandleError, match="worker 1: cannot advance to epoch 2 after close"):
        handle.advance_to(2)
    assert handle.epoch is None


def test_a_send_that_advances_commits_both_or_neither(
    rt: Runtime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fits = write(tmp_path / "fits.parquet", orders_table().cast(ARROW["orders"]))
    handle = rt.input("orders", 0)
    with pytest.raises(InvalidInputTimeError):  # refused before any work
        handle.send(fits, advance_to=-1)
    nothing_committed(rt)

    from progress.ledger import inputs, writer

    def failed(*args: object, **kwargs: object) -> object:
        inputs_write(*args, **kwargs)  # both batches written, then the transaction fails
        raise RuntimeError("the write failed")

    inputs_write = writer.write_batches
    with monkeypatch.context() as m:  # neither commits
        m.setattr(inputs, "write_batches", failed)
        with pytest.raises(RuntimeError, match="the write failed"):
            handle.send(fits, advance_to=1)
    nothing_committed(rt)
    assert handle.epoch == 0

    sent = handle.send(fits, advance_to=2)  # epoch 1 sealed empty on the way
    assert not sent.repeated
    assert handle.epoch == 2
    assert [m.rows for m in rt.ledger.message("shop", "orders", 0, 0)] == [2]
    assert [m.rows for m in rt.ledger.message("shop", "orders", 0, 1)] == [0]
    assert handle.advance_to(2).repeated  # the advance was committed under its own key
    with pytest.raises(TimeRegressionError):  # before any work: nothing written at epoch 2
        handle.send(fits, advance_to=1)
    assert rt.ledger.message("shop", "orders", 0, 2) == []
    assert len(list((rt.store.root / "shop" / "orders").glob("**/*.parquet"))) == 1
