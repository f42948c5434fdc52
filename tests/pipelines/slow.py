"""A pipeline whose one stage is slow on purpose, so a test can kill it mid-write.

python -m tests.pipelines.slow ROOT      # runs stage `slow` for epoch 0 and exits
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines.dataflow import Pipeline
from pipelines.runtime import Runtime
from pipelines.spark import spark_session
from progress.ledger import Ledger

NUMS = T.StructType([T.StructField("n", T.LongType())])


def crawl(n: int) -> int:
    time.sleep(0.05)
    return n * 2


def slow_double(df: DataFrame) -> DataFrame:
    # The slow UDF runs after the shuffle, in the stage that writes: the kill lands mid-write.
    return df.repartition(4).select(F.udf(crawl, T.LongType())("n").alias("n"))


def pipeline() -> Pipeline:
    p = Pipeline("slowpoke")
    nums = p.source("nums", schema=NUMS)
    p.transform("slow", nums, fn=slow_double)
    return p


def runtime(root: Path, spark: object) -> Runtime:
    return Runtime(pipeline(), Ledger(root / "ledger.duckdb"), spark, root / "data")  # type: ignore[arg-type]


if __name__ == "__main__":
    root = Path(sys.argv[1])
    rt = runtime(root, spark_session("local[2]", {"spark.sql.shuffle.partitions": "2"}))
    print("starting", flush=True)
    rt.run_stage("slow", 0)
    print("done", flush=True)
