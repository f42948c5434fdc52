"""Transforms that are not materialized (``materialize=False``): recomputed inside the stages
that read them, with the same results, the same lineage and exactly-once revisions."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import types as T

from pipelines.dataflow import Pipeline
from pipelines.errors import PipelineDefinitionError
from pipelines.examples import bank
from pipelines.examples.bank_data import DemoData, Oracle, generate
from pipelines.examples.demo import verify_outputs
from pipelines.runtime import Runtime
from progress.errors import CaptureError
from progress.ledger import Ledger

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
