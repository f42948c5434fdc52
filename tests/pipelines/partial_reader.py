"""Reads of ``ledger_pipeline``'s partial stages from another process, for tests that kill it
or run epochs beside it.

python -m tests.pipelines.partial_reader ROOT stuck       # fills key 1 of `balances`, and the
                                                          # fold sleeps in Spark (to be killed)
python -m tests.pipelines.partial_reader ROOT snapshots   # reads keys 1, 2 of `balances` (and
    # evicts them every other time) until ROOT/stop exists; one JSON line per read

It prints ``ready`` once its Spark session and runtime are up.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines.runtime import Runtime
from pipelines.spark import spark_session
from progress.ledger import Ledger
from tests.pipelines.partials import fold, ledger_pipeline

SIGNAL = "filling"
"""The file a stuck fill creates under ROOT once Spark runs its fold."""


def stuck_fold(batch: DataFrame, state: DataFrame) -> DataFrame:
    """``fold``, whose every row waits in a Spark task after saying so in ROOT/filling."""
    signal = str(Path(sys.argv[1]) / SIGNAL)

    def wait(n: int) -> int:
        Path(signal).touch()
        time.sleep(600)
        return n

    return fold(batch, state).withColumn("n", F.udf(wait, T.LongType())("n"))


def main(root: Path, mode: str) -> None:
    spark = spark_session("local[2]", {"spark.sql.shuffle.partitions": "2"})
    pipeline = ledger_pipeline(update=stuck_fold if mode == "stuck" else fold)
    rt = Runtime(pipeline, Ledger(root / "ledger.duckdb"), spark, root / "data")
    print("ready", flush=True)
    if mode == "stuck":
        rt.lookup("balances", [1])
        print("filled", flush=True)
        return
    reads = 0
    while not (root / "stop").exists() or reads < 2:
        read = rt.lookup("balances", [1, 2], wait=120)
        answer = {"as_of": read.as_of, "rows": read.rows, "hits": read.hits}
        print(json.dumps(answer), flush=True)
        reads += 1
        if reads % 2:
            rt.evict("balances", [1, 2])


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
