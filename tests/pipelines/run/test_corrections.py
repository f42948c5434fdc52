"""Corrections: a source worker's re-delivered input for a past epoch replaces what it sent
there; every output that read it is recomputed once, frontiers stay, and the results equal
DuckDB SQL over the corrected raw inputs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines.cli.main import main
from pipelines.errors import InputValidationError, RunFailedError
from pipelines.run.runtime import Runtime
from pipelines.stages.pipeline import Pipeline
from pipelines.testing import assert_output, close_sources, frame, send_epochs, throwaway_runtime
from progress import EpochNotReachedError, InvalidInputTimeError, NothingToCorrectError
from progress.ledger import Ledger
from tests.fixtures.shop import ARROW, WORKERS, Shop, oracle, rows_of

pytestmark = pytest.mark.spark


def orders_file(path: Path, first_id: int, amounts: list[float]) -> Path:
    """A re-delivered orders file: one order per amount."""
    path.parent.mkdir(parents=True, exist_ok=True)
    n = len(amounts)
    table = pa.table(
        {
            "order_id": [first_id + i for i in range(n)],
            "customer": ["ann", "O'Brien", "zoë", "bob"][:n],
            "category": ["books", "toys", "food", "toys"][:n],
            "amount": amounts,
        },
        schema=ARROW["orders"],
    )
    pq.write_table(table, path)
    return path


def attempt_dirs(rt: Runtime, source: str) -> set[Path]:
    return set((rt.store.root / rt.pipeline.name / source).glob("port=0/epoch=*/attempt=*"))


def test_a_correction_reaches_every_output_that_read_it_once(
    tmp_path: Path, spark: SparkSession
) -> None:
    shop_ = Shop(tmp_path, spark)
    shop_.run_epochs(2)
    rt, ledger = shop_.rt, shop_.ledger
    before = ledger.tracker("shop").pointstamps()
    kept = ledger.message("shop", "orders", 0, 1)[1]  # worker 1's (sent after worker 0's)

    fixed = orders_file(tmp_path / "redelivered" / "w0-e1.parquet", 9000, [12.5, -3.0, 40.0])
    result = rt.input("orders", 0).correct(1, fixed)
    assert not result.repeated
    shop_.files["orders"][1][0] = fixed  # worker 0's file at epoch 1 is the re-delivered one
    current = ledger.message("shop", "orders", 0, 1)
    assert kept in current  # worker 1's message at epoch 1 stays
    assert len(current) == 2
    assert rt.stale() == [("valid_orders", 1)]

    results = rt.run()
    assert sorted((r.stage, r.epoch, r.status.value) for r in results) == [
        (stage, 1, "revised")
        for stage in (
            "by_category",
            "by_region",
            "export",
            "movements",
            "settled",
            "valid_orders",
        )
    ]
    assert rt.run() == []  # nothing is left stale: running again does nothing
    assert ledger.tracker("shop").pointstamps() == before  # no frontier moved
    for epoch in range(4):
        expected = oracle(shop_.files, epoch)
        for stage, rows in expected.items():
            if stage != "settled" and epoch > 1:
                continue
            assert rows_of(rt.read_arrow(stage, epoch)) == rows, f"{stage} at epoch {epoch}"
    exported = rows_of(spark.read.parquet(str(shop_.sink / "epoch=1")))
    assert exported == oracle(shop_.files, 1)["by_category"]
    assert ledger.verify().ok


MOVES = T.StructType(
    [T.StructField("account", T.StringType()), T.StructField("cents", T.LongType())]
)
BALANCES = T.StructType(
    [
        T.StructField("account", T.StringType()),
        T.StructField("balance", T.LongType()),
        T.StructField("moves", T.LongType()),
    ]
)


def update_balances(batch: DataFrame, state: DataFrame) -> DataFrame:
    moved = batch.groupBy("account").agg(F.sum("cents").alias("delta"), F.count("*").alias("n"))
    joined = moved.join(state, on="account", how="left")
    return joined.select(
        "account",
        (F.coalesce(F.col("balance"), F.lit(0)) + F.col("delta")).alias("balance"),
        (F.coalesce(F.col("moves"), F.lit(0)) + F.col("n")).alias("moves"),
    )


def ledger_book() -> Pipeline:
    p = Pipeline("book")
    moves = p.source("moves", schema=MOVES, workers=2, key=["account"])
    p.stateful("balances", moves, key=["account"], schema=BALANCES, update=update_balances)
    return p


def balances_oracle(sent: dict[tuple[int, int], list[tuple[str, int]]], epoch: int) -> list[Any]:
    """Balances at ``epoch`` of the accounts that moved in it, in DuckDB SQL over the raw rows
    (worker, epoch, account, cents)."""
    con = duckdb.connect()
    con.execute("CREATE TABLE moves (worker INT, epoch INT, account VARCHAR, cents BIGINT)")
    for (worker, e), rows in sent.items():
        con.executemany("INSERT INTO moves VALUES (?, ?, ?, ?)", [(worker, e, *r) for r in rows])
    found = con.execute(
        "SELECT account, sum(cents), count(*) FROM moves WHERE epoch <= $e "
        "AND account IN (SELECT account FROM moves WHERE epoch = $e) GROUP BY account "
        "ORDER BY account",
        {"e": epoch},
    ).fetchall()
    con.close()
    return found


def test_a_stateful_stage_recomputes_from_the_corrected_epoch(
    tmp_path: Path, spark: SparkSession
) -> None:
    sent = {
        (0, 0): [("ann", 100), ("bob", 5)],
        (1, 0): [("ann", 7)],
        (0, 1): [("ann", 10)],
        (1, 1): [("bob", 20), ("cy", 1)],
        (0, 2): [("bob", 3), ("ann", 1)],
        (1, 2): [("cy", 2)],
    }
    with throwaway_runtime(ledger_book(), spark, home=tmp_path) as rt:
        for worker in (0, 1):
            send_epochs(
                rt,
                "moves",
                {e: rows for (w, e), rows in sent.items() if w == worker},
                worker=worker,
            )
        close_sources(rt)
        assert len(rt.run()) == 3
        sent[(1, 1)] = [("bob", 200), ("dee", 4)]  # worker 1 re-delivers epoch 1
        rt.input("moves", 1).correct(1, frame(rt, "moves", sent[(1, 1)]))
        results = rt.run()
        # From the corrected epoch on, each once; epoch 0 did not read it.
        assert [(r.stage, r.epoch, r.status.value) for r in results] == [
            ("balances", 1, "revised"),
            ("balances", 2, "revised"),
        ]
        assert rt.run() == []
        for epoch in range(3):
            got = sorted(tuple(r) for r in rt.read("balances", epoch).collect())
            assert got == balances_oracle(sent, epoch), f"balances at epoch {epoch}"


def test_a_correction_is_validated_like_a_send_and_only_for_reached_epochs(
    tmp_path: Path, spark: SparkSession
) -> None:
    shop_ = Shop(tmp_path, spark)
    rt, ledger = shop_.rt, shop_.ledger
    shop_.send("orders", 0, 0)
    rt.input("orders", 0).advance_to(1)  # worker 1 still holds epoch 0
    sent = ledger.message("shop", "orders", 0, 0)
    dirs = attempt_dirs(rt, "orders")
    good = orders_file(tmp_path / "fix.parquet", 7000, [1.0, 2.0])

    with pytest.raises(EpochNotReachedError) as early:
        rt.input("orders", 0).correct(2, good)
    e = early.value
    assert (e.pipeline, e.source, e.worker, e.current, e.requested) == ("shop", "orders", 0, 1, 2)
    assert "send() data for the epoch it is at" in str(e)
    with pytest.raises(InvalidInputTimeError, match="worker 0, at epoch 1: '0' is not an epoch"):
        rt.input("orders", 0).correct("0", good)  # type: ignore[arg-type]
    bad = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"order_id": [1], "customer": ["x"], "category": ["y"]}), bad)
    with pytest.raises(InputValidationError) as invalid:
        rt.input("orders", 0).correct(0, bad)
    v = invalid.value
    assert (v.pipeline, v.stage, v.worker, v.epoch, v.file, v.column) == (
        "shop",
        "orders",
        0,
        0,
        str(bad),
        "amount",
    )
    assert str(v).startswith("pipeline 'shop', source 'orders', worker 0, epoch 0, file ")
    assert ledger.message("shop", "orders", 0, 0) == sent  # nothing was committed
    assert attempt_dirs(rt, "orders") == dirs

    # An epoch nothing downstream has run yet: the run reads the corrected data.
    rt.input("orders", 0).correct(0, good)
    shop_.files["orders"][0] = [good]
    for source, workers in WORKERS.items():
        for w in range(workers):
            if source != "orders" or w == 1:
                shop_.send(source, w, 0)
            rt.input(source, w).close()
    assert rt.stale() == []
    rt.run()
    expected = oracle(shop_.files, 0)
    for stage in ("valid_orders", "movements", "by_category"):
        assert rows_of(rt.read_arrow(stage, 0)) == expected[stage], stage
    assert ledger.verify().ok

    # Worker 1 closed at epoch 1: nothing of its reached epoch 1's outputs, so no data of it
    # there can be corrected (it would reach none of them); refused before any work.
    dirs = attempt_dirs(rt, "orders")
    with pytest.raises(NothingToCorrectError) as nothing:
        rt.input("orders", 1).correct(1, good)
    n = nothing.value
    assert (n.pipeline, n.source, n.worker, n.current, n.requested) == (
        "shop",
        "orders",
        1,
        None,
        1,
    )
    assert "cannot correct epoch 1, where it sent nothing (it closed before it sent there)" in str(
        n
    )
    assert attempt_dirs(rt, "orders") == dirs
    assert ledger.message("shop", "orders", 0, 1) == []


def doubled(df: DataFrame) -> DataFrame:
    return df.select("account", (F.col("cents") * 2).alias("cents"))


def cli_pipeline() -> Pipeline:
    """A two-worker source and one transform, for the command line."""
    p = Pipeline("cli_book")
    moves = p.source("moves", schema=MOVES, workers=2, key=["account"])
    p.transform("doubled", moves, fn=doubled)
    return p


def test_correct_and_the_advance_rule_from_the_shell(
    tmp_path: Path, spark: SparkSession, capsys: pytest.CaptureFixture[str]
) -> None:
    where = [
        "-p",
        f"{__name__}:cli_pipeline",
        "--ledger",
        str(tmp_path / "l.duckdb"),
        "--data",
        str(tmp_path / "data"),
    ]
    files = {}
    for name, rows in {
        "w0": [("ann", 1)],
        "w1": [("bob", 2)],
        "fix": [("ann", 5), ("cy", 6)],
    }.items():
        files[name] = tmp_path / f"{name}.parquet"
        schema = pa.schema([("account", pa.string()), ("cents", pa.int64())])
        table = pa.table({"account": [r[0] for r in rows], "cents": [r[1] for r in rows]})
        pq.write_table(table.cast(schema), files[name])
    for w in (0, 1):
        assert main(["send", "moves", str(files[f"w{w}"]), "--worker", str(w), *where]) == 0
        assert main(["advance", "moves", "2", "--worker", str(w), *where]) == 0
    assert main(["advance", "moves", "2", "--worker", "0", *where]) == 0  # a retry: nothing
    assert main(["advance", "moves", "1", "--worker", "0", *where]) == 1
    err = capsys.readouterr().err
    assert (
        "source 'moves', worker 0, at epoch 2: cannot advance to epoch 1; epochs only move "
        "forward" in err
    )
    assert main(["run", *where]) == 0
    assert main(["correct", "moves", "3", str(files["fix"]), "--worker", "0", *where]) == 1
    assert "cannot correct epoch 3, which it has not reached" in capsys.readouterr().err
    assert main(["correct", "moves", "0", str(files["fix"]), "--worker", "0", *where]) == 0
    out = capsys.readouterr().out
    assert f"corrected moves worker 0 at epoch 0 with {files['fix']}" in out
    assert main(["run", *where]) == 0
    assert "cli_book.doubled epoch 0: revised" in capsys.readouterr().out
    rt = Runtime(cli_pipeline(), Ledger(tmp_path / "l.duckdb"), spark, tmp_path / "data")
    got = sorted(tuple(r) for r in rt.read("doubled", 0).collect())
    con = duckdb.connect()
    expected = con.execute(
        "SELECT account, cents * 2 FROM read_parquet([?, ?]) ORDER BY ALL",
        [str(files["fix"]), str(files["w1"])],
    ).fetchall()
    assert got == expected


def non_negative(df: DataFrame) -> DataFrame:
    """Its rows, once every amount is checked (Spark's ``assert_true`` fails the job)."""
    return df.where(F.assert_true(F.col("cents") >= 0).isNull())


def test_a_failed_revision_is_told_under_its_own_stage_and_the_rest_still_revise(
    tmp_path: Path, spark: SparkSession
) -> None:
    """Corrections at epochs 0 and 1: once ``checked`` 0 is revised, ``sums`` 0 is stale too, but
    a stateful stage is revised after the stale outputs above it, so ``checked`` 1 goes first,
    and fails on the corrected data. That failure is ``checked``'s, once: ``sums`` (which does
    not read ``checked`` 1 until it is revised) is revised from epoch 0 in the same call."""
    p = Pipeline("refail")
    moves = p.source("moves", schema=MOVES)
    checked = p.transform("checked", moves, fn=non_negative)
    p.aggregate("sums", checked, key=["account"], aggs={"total": ("sum", "cents")})
    with throwaway_runtime(p, spark, home=tmp_path) as rt:
        send_epochs(rt, "moves", {0: [("a", 5)], 1: [("a", 7)]}, close=True)
        rt.run()
        rt.input("moves").correct(0, frame(rt, "moves", [("a", 6)]))
        rt.input("moves").correct(1, frame(rt, "moves", [("a", -1)]))
        with pytest.raises(RunFailedError) as err:
            rt.run()
        failures = [(f.stage, f.epoch) for f in err.value.failures]
        assert failures == [("checked", 1)], str(err.value)
        made = [(r.stage, r.epoch) for r in err.value.results]
        assert made == [("checked", 0), ("sums", 0), ("sums", 1)]
        assert_output(rt, "sums", 0, [("a", 6)])
        assert rt.stale() == [("checked", 1)]
