"""Lag and lateness from a real ledger: a worker that releases each epoch later than the other
is named with a lateness of at least its delay; each stage's latest final epoch, its latency,
and its oldest open epoch with what holds it; the same from ``epochgate lag``."""

from __future__ import annotations

import json
import time
from datetime import timedelta
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from pipelines.cli.main import main
from pipelines.errors import PipelineDefinitionError, PipelineError
from pipelines.run.runtime import Runtime
from progress.lateness import complete_at
from progress.ledger import Ledger
from tests.pipelines.cli.places import on
from tests.pipelines.reads.test_subscription import numbers, write

pytestmark = pytest.mark.spark

PIPELINE = numbers()
REF = "tests.pipelines.reads.test_lag:PIPELINE"
DELAY = 0.4
"""Seconds worker 1 releases each epoch after worker 0."""


def test_a_late_worker_and_each_stage_lag(
    tmp_path: Path, spark: SparkSession, capsys: pytest.CaptureFixture[str]
) -> None:
    rt = Runtime(PIPELINE, Ledger(tmp_path / "ledger.duckdb"), spark, tmp_path / "data")
    for epoch in range(3):
        for w in (0, 1):
            if w == 1:
                time.sleep(DELAY)
            rt.input("nums", w).send(write(tmp_path / f"w{w}-{epoch}.parquet", [epoch, 10 + w]))
            rt.input("nums", w).advance_to(epoch + 1)
    rt.input("nums", 0).send(write(tmp_path / "w0-3.parquet", [3]))  # epoch 3: worker 1 holds it
    rt.input("nums", 0).advance_to(4)
    rt.run()

    first, late = rt.lateness("nums")
    assert (first.worker, first.epochs, first.worst_seconds) == (0, 3, 0.0)
    assert (late.worker, late.epochs) == (1, 3)
    assert DELAY <= late.median_seconds <= late.worst_seconds < DELAY + 5
    with pytest.raises(PipelineError):
        rt.lateness("big")

    lags = {lag.stage: lag for lag in rt.lag()}
    assert set(lags) == {"nums", "big"}
    for name, lag in lags.items():
        assert lag.latest_final == 2, name
        assert lag.input_complete_at is not None
        assert lag.final_at is not None
        assert lag.final_at >= lag.input_complete_at
        assert lag.latency_seconds is not None
        assert 0 <= lag.latency_seconds < 120
        assert lag.oldest_open == 3
        assert lag.blockers == ("source nums, worker 1, still holds epoch 3",)
        assert lag.open_seconds is not None
        assert lag.open_seconds >= 0
    assert lags["nums"].latency_seconds == 0  # a source's epoch is final once released
    # One epoch's times read only that epoch's moments: the same as the whole timeline's.
    whole = rt.ledger.timeline("numbers")
    for epoch in range(4):
        times = rt.epoch_times("big", epoch)
        want = complete_at(whole.releases, {"nums": 2}, {"nums": [epoch]})
        assert times.input_complete_at == want, epoch
        assert times.committed_at == whole.commits.get(("big", epoch)), epoch
        assert times.final == (epoch < 3)
    assert rt.epoch_times("big", 2).input_complete_at == lags["big"].input_complete_at
    assert lags["big"].describe().startswith("big: epoch 2 final ")
    assert lags["big"].describe().endswith(": source nums, worker 1, still holds epoch 3")

    where = on(REF, tmp_path)
    assert main(["lag", *where]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["stage", "final", "latency", "open", "open", "for", "held", "by"]
    assert out[2].startswith("big ")
    assert out[2].endswith("source nums, worker 1, still holds epoch 3")
    assert main(["lag", "--json", *where]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["stage"], r["latest_final"], r["oldest_open"]) for r in records] == [
        ("nums", 2, 3),
        ("big", 2, 3),
    ]
    assert main(["lag", "--sources", *where]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith("nums worker 1: ")
    assert lines[1].endswith("at worst, over 3 epoch(s)")


def test_a_stage_behind_its_freshness_is_named_by_lag_and_the_sensor(
    tmp_path: Path, spark: SparkSession
) -> None:
    from dagster_project.sensors import read_tick

    p = numbers(freshness=timedelta(seconds=1))
    assert p.fresh_within == {"big": timedelta(seconds=1)}
    with pytest.raises(PipelineDefinitionError) as raised:
        p.freshness("big", timedelta(0))
    assert raised.value.argument == "within"
    with pytest.raises(PipelineDefinitionError, match="a positive timedelta"):
        numbers(freshness=timedelta(seconds=-1))
    p.freshness("nums", timedelta(hours=1))  # a stage defined elsewhere
    assert p.fresh_within == {"big": timedelta(seconds=1), "nums": timedelta(hours=1)}
    rt = Runtime(p, Ledger(tmp_path / "ledger.duckdb"), spark, tmp_path / "data")
    rt.input("nums", 0).send(write(tmp_path / "w0.parquet", [1]))
    rt.input("nums", 0).advance_to(1)  # worker 1 holds epoch 0
    (fresh,) = [lag for lag in rt.lag() if lag.stage == "big"]
    assert (fresh.oldest_open, fresh.freshness_seconds) == (0, 1.0)
    time.sleep(1.5)
    (late,) = [lag for lag in rt.lag() if lag.stage == "big"]
    assert late.behind
    said = late.behind_sentence()
    assert said is not None
    assert said.startswith("stage big is behind: epoch 0 has been open for ")
    assert said.endswith("s, its freshness is 1s")
    tick = read_tick(rt.ledger, p)
    (sensed,) = tick.behind
    assert sensed.startswith("stage big is behind: epoch 0 has been open for ")
    assert "Stage big is behind: epoch 0 has been open for " in tick.skip_reason()
    nums = next(lag for lag in rt.lag() if lag.stage == "nums")
    assert not nums.behind  # no freshness declared
