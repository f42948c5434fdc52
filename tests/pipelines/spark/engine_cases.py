"""The engine conformance cases: tests of the suite, each checked against its DuckDB oracle,
run again here with ``spark`` a Spark Connect session on the engine ``EPOCHGATE_SPARK`` names:
``sail`` (a Sail server) or ``sc://...`` (a Spark Connect server).

Not collected with the suite (its name does not start with ``test_``): ``run_cases`` runs it in
a pytest of its own, in a child process, because a Spark Connect session and the suite's
classic session cannot share a process (PySpark refuses the second, and its functions build the
columns of whichever mode the process is in). One server serves the whole run: for Sail the
process's own, stopped by its pid when the run ends; for Spark Connect the caller's.

Each case is imported, not copied: the body, fixtures and oracle are the ones local Spark runs.
``CASES`` names them; the docs' engine table cites these names.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow.dataset as ds
import pytest

from pipelines.examples.bank_data import ORACLE_SQL, Oracle
from pipelines.examples.demo import read_balances, run_demo
from pipelines.run.sinks import VERSIONS
from pipelines.spark.engine import SAIL, SPARK_CONNECT, Engine, engine_of
from pipelines.spark.session import SAIL_ENGINES, SPARK_ENV
from tests.fixtures import exports
from tests.fixtures.exports import assert_hard_links, oracle, published
from tests.pipelines.capture.test_capture_replay import (
    test_a_replayed_stage_stream_gives_the_same_outputs_on_another_ledger,
    upstream,
)
from tests.pipelines.reads.test_partial_chains import (
    test_a_join_below_a_partial_stage_and_revisions_that_leave_holes_holes,
)
from tests.pipelines.reads.test_partial_reads import (
    test_a_never_read_key_is_upqueried_then_answered_from_state,
    test_an_evicted_key_reads_the_same_and_refills_with_what_it_missed,
)
from tests.pipelines.reads.test_partial_time import (
    test_a_partial_view_added_to_a_pipeline_with_history_answers_at_once,
)
from tests.pipelines.run.test_corrections import (
    test_a_correction_reaches_every_output_that_read_it_once,
    test_a_stateful_stage_recomputes_from_the_corrected_epoch,
)
from tests.pipelines.run.test_delta_sink import (
    test_each_epoch_is_one_table_commit_read_alike_by_three_engines,
)
from tests.pipelines.run.test_dimension import (
    one_worker,
    test_a_dimension_is_corrected_only_where_its_worker_sent_a_table,
    test_a_reader_sees_the_table_as_of_its_epoch_and_after_close_the_last,
)
from tests.pipelines.run.test_iceberg_sink import (
    test_each_epoch_is_one_table_commit_read_alike_by_two_engines,
)
from tests.pipelines.run.test_iterate import (
    test_rounds_reach_the_fixed_point_and_equal_the_oracle,
)
from tests.pipelines.run.test_revise import (
    done_demo,
    test_a_backfill_of_the_same_code_changes_nothing,
    test_a_code_change_revised_reaches_every_downstream_output,
)
from tests.pipelines.run.test_runtime import (
    test_a_union_catalogs_its_inputs_files_and_writes_only_when_columns_differ,
    test_every_stage_matches_the_oracle_with_late_data,
)
from tests.pipelines.run.test_sinks import committed, inputs, shown

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.spark]

FIXTURES = (upstream, one_worker, done_demo)
"""Fixtures of the imported cases, imported with them so that they are found here."""


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """A session on the engine ``EPOCHGATE_SPARK`` names (what a case starts by
    ``spark_session()`` is a session on the same server)."""
    from pipelines.spark.sail import stop_owned
    from pipelines.spark.session import spark_session

    session = spark_session()
    yield session
    session.stop()
    stop_owned()


def asked_for() -> Engine:
    return SAIL if os.environ.get(SPARK_ENV) in SAIL_ENGINES else SPARK_CONNECT


def test_the_session_is_on_the_engine_asked_for(spark: SparkSession) -> None:
    assert engine_of(spark) is asked_for()


def test_bank_lookups_upqueries_and_an_eviction_match_the_oracle(
    tmp_path: Path, spark: SparkSession
) -> None:
    """The demo (late data, every stage at every epoch against the oracle, lookups as of each
    epoch), then reads of ``balances``: holes filled by an upquery, a hit, an eviction and the
    same value read again, each against the oracle."""
    lines: list[str] = []
    summary = run_demo(
        tmp_path / "demo", epochs=4, rows=400, accounts=30, seed=7, echo=lines.append
    )
    assert summary.mismatches == ()
    assert summary.runs == len(ORACLE_SQL) * 4
    assert "source card_payments, worker 2, still holds epoch 2" in "\n".join(lines)
    from pipelines.examples.bank import pipeline
    from pipelines.run.runtime import Runtime
    from progress.ledger import Ledger

    home = tmp_path / "demo"
    rt = Runtime(pipeline(), Ledger(home / "ledger.duckdb"), spark, home / "data")
    oracle = Oracle(home / "inputs")
    assert read_balances(rt, oracle, oracle.some_accounts()[:3], print) == []


def test_a_sink_publishes_each_committed_epoch_for_the_engine_duckdb_and_pyarrow(
    tmp_path: Path, spark: SparkSession
) -> None:
    """``test_sinks``' publishing case on every engine: the sink's message is hard links to its
    input's files (``StageWork.linkable``: Sail's carry no Spark schema in their footers, one
    file schema is enough), and Sail reads the ``epoch=N`` folders' values as strings (Spark
    infers integers)."""
    files = inputs(tmp_path, 3)
    rt = exports.runtime(tmp_path / "home", spark)
    exports.send(rt, files)
    rt.run()
    for epoch in range(3):
        assert_hard_links(rt.ledger, "sales", "export", "totals", epoch)
    root = rt.sink_path("export")
    assert sorted(p.name for p in root.iterdir()) == [VERSIONS, "epoch=0", "epoch=1", "epoch=2"]
    assert shown(rt) == committed(rt)
    expected = oracle(files)
    assert published(root) == expected  # DuckDB: PATH/*/*.parquet, hive partitioning
    from_engine = spark.read.parquet(str(root)).select("epoch", "item", "total").collect()
    inferred = str if engine_of(spark) is SAIL else int  # Sail infers no partition column types
    assert {type(r.epoch) for r in from_engine} == {inferred}
    assert sorted((int(r.epoch), r.item, round(r.total, 6)) for r in from_engine) == expected
    from_arrow = ds.dataset(root, partitioning="hive").to_table().to_pylist()
    assert sorted((r["epoch"], r["item"], round(r["total"], 6)) for r in from_arrow) == expected
    before = committed(rt)
    assert [r.status for r in rt.revise("export", [1])] == ["revised"]
    assert committed(rt)[1] != before[1]
    assert shown(rt) == committed(rt)
    assert published(root) == expected


def test_python_udfs_fail_on_sail_with_a_pyspark_newer_than_it_knows(spark: SparkSession) -> None:
    """Sail 0.7 runs Python UDFs with the PySpark installed beside it, as far as 4.2: a newer
    one is presented to it as 4.2, and a plain Python UDF then fails in its worker. Spark runs
    them."""
    import pyspark
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from pipelines.spark._internals import SAIL_NEWEST_PYSPARK

    doubled = spark.range(3).select(F.udf(lambda x: x * 2, T.LongType())("id").alias("x"))
    known = tuple(int(p) for p in pyspark.__version__.split(".")[:2]) <= SAIL_NEWEST_PYSPARK
    if engine_of(spark) is not SAIL or known:
        assert sorted(r.x for r in doubled.collect()) == [0, 2, 4]
    else:
        with pytest.raises(Exception, match="udfs"):
            doubled.collect()


def test_an_aggregate_epoch_asks_the_server_for_one_schema(
    tmp_path: Path, spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each schema a run asks for is a round trip to the server: an aggregate's epoch asks for
    its input's only (its partials' schema is known from the first epoch on, and its merge's
    rows have the state's types by construction), and its totals equal the oracle's."""
    import duckdb
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyspark.sql import types as T

    from pipelines import Pipeline, Runtime
    from progress.ledger import Ledger

    moves = T.StructType(
        [T.StructField("account", T.LongType()), T.StructField("amount", T.LongType())]
    )
    p = Pipeline("schemas")
    source = p.source("moves", schema=moves)
    p.aggregate("totals", source, key=["account"], aggs={"total": ("sum", "amount")})
    rt = Runtime(p, Ledger(tmp_path / "ledger.duckdb"), spark, tmp_path / "data")
    arrow = pa.schema([("account", pa.int64()), ("amount", pa.int64())])
    asked: list[int] = []
    schema = type(spark.client).schema

    def counted(client: object, plan: object) -> object:
        asked.append(1)
        return schema(client, plan)  # type: ignore[arg-type]

    monkeypatch.setattr(type(spark.client), "schema", counted)
    for epoch in range(3):
        path = tmp_path / f"moves-{epoch}.parquet"
        rows = {"account": [1, 2, epoch + 3], "amount": [10 * epoch, 5, 1]}
        pq.write_table(pa.table(rows, schema=arrow), path)
        rt.input("moves").send(path, advance_to=epoch + 1)
        asked.clear()
        rt.run()
        if epoch:  # the first epoch learns the partials' schema
            assert len(asked) == 1, f"epoch {epoch} asked the server for {len(asked)} schemas"
        moved = {r["account"]: r["total"] for r in rt.read("totals", epoch).collect()}
        upto = [str(tmp_path / f"moves-{e}.parquet") for e in range(epoch + 1)]
        expected = duckdb.execute(
            "SELECT account, sum(amount) FROM read_parquet($upto) GROUP BY account "
            "HAVING account IN (SELECT account FROM read_parquet($now))",
            {"upto": upto, "now": str(path)},
        ).fetchall()
        assert moved == dict(expected), f"epoch {epoch}"


CASES = {
    "transform, union, stateful, late data": test_every_stage_matches_the_oracle_with_late_data,
    "union of files": test_a_union_catalogs_its_inputs_files_and_writes_only_when_columns_differ,
    "iterate": test_rounds_reach_the_fixed_point_and_equal_the_oracle,
    "dimension join": test_a_reader_sees_the_table_as_of_its_epoch_and_after_close_the_last,
    "dimension correction": test_a_dimension_is_corrected_only_where_its_worker_sent_a_table,
    "sink": test_a_sink_publishes_each_committed_epoch_for_the_engine_duckdb_and_pyarrow,
    "Delta sink": test_each_epoch_is_one_table_commit_read_alike_by_three_engines,
    "Iceberg sink": test_each_epoch_is_one_table_commit_read_alike_by_two_engines,
    "upquery": test_a_never_read_key_is_upqueried_then_answered_from_state,
    "eviction": test_an_evicted_key_reads_the_same_and_refills_with_what_it_missed,
    "join below a partial stage": (
        test_a_join_below_a_partial_stage_and_revisions_that_leave_holes_holes
    ),
    "aggregate, partial and full": (
        test_a_partial_view_added_to_a_pipeline_with_history_answers_at_once
    ),
    "capture and replay": test_a_replayed_stage_stream_gives_the_same_outputs_on_another_ledger,
    "correction": test_a_correction_reaches_every_output_that_read_it_once,
    "stateful correction": test_a_stateful_stage_recomputes_from_the_corrected_epoch,
    "revision": test_a_code_change_revised_reaches_every_downstream_output,
    "backfill": test_a_backfill_of_the_same_code_changes_nothing,
    "bank": test_bank_lookups_upqueries_and_an_eviction_match_the_oracle,
}
"""What each case shows, by the name of its test."""
