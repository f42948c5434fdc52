"""``Runtime.subscribe``: a stage's epochs in order, each once it is final, and again when a
revision replaces it, with the progress made by another process; it ends once every input
closed, or after its timeout."""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import types as T

from pipelines import Completed, Ledger, Pipeline, Runtime
from pipelines.errors import InvalidEpochError

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[3]
NUMBERS = T.StructType([T.StructField("k", T.LongType()), T.StructField("v", T.LongType())])


def numbers(freshness: timedelta | None = None) -> Pipeline:
    """One source of two workers (the other process feeds it) and a transform below (with
    ``freshness``)."""
    p = Pipeline("numbers")
    nums = p.source("nums", schema=NUMBERS, workers=2)
    p.transform("big", nums, fn=lambda df: df, freshness=freshness)
    return p


def write(path: Path, keys: list[int]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.table(
        {"k": keys, "v": [k * 10 for k in keys]},
        schema=pa.schema([("k", pa.int64()), ("v", pa.int64())]),
    )
    pq.write_table(table, path)
    return path


FEEDER = """
import sys, time
from pathlib import Path
from pipelines import Ledger, Runtime, spark_session
from tests.pipelines.reads.test_subscription import numbers

root = Path(sys.argv[1])
rt = Runtime(numbers(), Ledger(root / "ledger.duckdb"), spark_session, root / "data")
for epoch in range(3):
    for worker in (0, 1):
        time.sleep(0.3)
        rt.input("nums", worker).send(root / "raw" / f"w{worker}-e{epoch}.parquet")
        rt.input("nums", worker).advance_to(epoch + 1)
go = root / "go"  # the subscriber has seen epoch 2: the correction comes after it
deadline = time.monotonic() + 120
while not go.exists() and time.monotonic() < deadline:
    time.sleep(0.05)
rt.input("nums", 1).correct(1, root / "raw" / "fixed.parquet")
for worker in (0, 1):
    rt.input("nums", worker).close()

assert not rt.spark_started  # pyarrow checked every file: this process started no JVM
print("fed", flush=True)
"""


def keys_of(done: Completed) -> list[int]:
    return sorted(row[0] for row in done.frame.select("k").collect())


def oracle(files: list[Path]) -> list[int]:
    """The keys of ``files``, in DuckDB over the raw files."""
    return sorted(r[0] for r in duckdb.read_parquet([str(f) for f in files]).fetchall())


def test_a_subscription_follows_another_process_in_order_with_revisions(
    tmp_path: Path, spark: SparkSession
) -> None:
    raw = tmp_path / "raw"
    files = {
        (w, e): write(raw / f"w{w}-e{e}.parquet", [100 * e + 10 * w + i for i in range(3)])
        for w in (0, 1)
        for e in range(3)
    }
    fixed = write(raw / "fixed.parquet", [999])
    rt = Runtime(numbers(), Ledger(tmp_path / "ledger.duckdb"), spark, tmp_path / "data")
    feeder = subprocess.Popen(
        [sys.executable, "-c", FEEDER, str(tmp_path)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        seen = []
        for done in rt.subscribe("nums", poll=0.1, timeout=60):
            seen.append((done.epoch, done.revision, keys_of(done)))
            if (done.epoch, done.revision) == (2, False):
                (tmp_path / "go").touch()  # the feeder corrects epoch 1 only now
        out, err = feeder.communicate(timeout=120)
    finally:
        feeder.kill()
    assert feeder.returncode == 0, err[-3000:]
    assert out.strip() == "fed"
    assert seen == [
        *((e, False, oracle([files[0, e], files[1, e]])) for e in range(3)),
        (1, True, oracle([files[0, 1], fixed])),  # the correction, then every worker closed
    ]

    # A stage below, run here: its epochs as they are run, the corrected one once re-run.
    below = rt.subscribe("big", timeout=0.5)
    assert [(d.epoch, d.revision) for d in below] == []  # nothing has run: no epoch is final
    rt.run()
    after = [(d.epoch, d.revision, keys_of(d)) for d in rt.subscribe("big", from_epoch=1)]
    assert after == [
        (1, False, oracle([files[0, 1], fixed])),
        (2, False, oracle([files[0, 2], files[1, 2]])),
    ]


def test_a_subscription_refuses_an_unknown_stage_or_a_bad_epoch(
    tmp_path: Path, spark: SparkSession
) -> None:
    rt = Runtime(numbers(), Ledger(tmp_path / "ledger.duckdb"), spark, tmp_path / "data")
    with pytest.raises(InvalidEpochError):
        rt.subscribe("nums", from_epoch=-1)
