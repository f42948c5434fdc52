"""A run killed at any instant commits nothing; the re-run succeeds and counts once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession

from pipelines.errors import StageFailedError
from pipelines.run.runtime import Runtime, run_key
from progress import Target
from progress.ledger import Ledger
from tests.fixtures import slow
from tests.fixtures.shop import shop
from tests.waiting import wait_until

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[3]


def test_a_run_killed_mid_write_leaves_nothing_visible(tmp_path: Path, spark: SparkSession) -> None:
    rt = slow.runtime(tmp_path, spark)
    rt.input("nums").send(spark.createDataFrame([(i,) for i in range(120)], slow.NUMS))
    rt.input("nums").close()
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.fixtures.slow", str(tmp_path)],
        cwd=REPO,
        start_new_session=True,  # its JVM too: the whole group is killed
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    attempts = tmp_path / "data" / "slowpoke" / "slow"
    try:
        wait_until(lambda: child.poll() is not None or slow.writing(tmp_path), 120, "the write")
        assert child.poll() is None, "the run finished before it could be killed"
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
    assert rt.ledger.committed("slowpoke", run_key("slow", 0)) is None
    assert rt.ledger.message("slowpoke", "slow", 0, 0) == []
    status = {s.stage: s for s in rt.ledger.status("slowpoke")}
    assert status["slow"].done == ()
    assert status["slow"].running == ()  # its process is gone
    assert status["slow"].ready == (0,)
    orphans = list(attempts.glob("port=0/epoch=*/attempt=*"))
    assert len(orphans) == 1

    result = rt.run_stage("slow", 0)
    assert result.status == "succeeded"
    assert result.rows == 120
    assert sorted(r.n for r in rt.read("slow", 0).collect()) == [2 * i for i in range(120)]
    assert rt.collect_garbage() == []  # too recent: it could belong to a run still writing
    assert rt.collect_garbage(older_than=0) == orphans
    assert rt.read("slow", 0).count() == 120
    assert rt.ledger.verify().ok


def test_a_failing_stage_commits_nothing_and_can_run_again(
    tmp_path: Path, spark: SparkSession
) -> None:
    calls = {"n": 0}

    def flaky(df: DataFrame) -> DataFrame:
        calls["n"] += 1
        if calls["n"] == 1:
            raise ValueError("upstream service timed out")
        return df

    pipeline = shop(tmp_path / "export", settle=flaky)
    rt = Runtime(pipeline, Ledger(tmp_path / "l.duckdb"), spark, tmp_path / "data")
    for source, workers in (("orders", 2), ("refunds", 1), ("customers", 1)):
        for w in range(workers):
            rt.input(source, w).advance_to(1)
    for stage_name in ("valid_orders", "refunds_negated", "movements"):
        rt.run_stage(stage_name, 0)
    with pytest.raises(StageFailedError, match="upstream service timed out") as err:
        rt.run_stage("settled", 0)
    assert (err.value.stage, err.value.epoch) == ("settled", 0)
    history = rt.ledger.history("shop", "settled", 0)
    assert [r.status for r in history.runs] == ["failed"]
    assert history.messages == ()
    assert rt.run_stage("settled", 0).status == "succeeded"
    assert rt.ledger.tracker("shop").count(Target("settled"), 0) == 0
