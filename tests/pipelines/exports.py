"""A pipeline with a sink at a relative path, its seeded inputs and their DuckDB-SQL oracle, and
a child process that kills itself at one point of the sink's run.

    python -m tests.pipelines.exports HOME POINT EPOCH [revise]

runs ``Runtime.run()`` (or, with ``revise``, ``revise("export", [EPOCH])``) on the ledger in
HOME and sends itself SIGKILL at POINT of the sink's run at EPOCH:

    commit   its attempt is written, its commit has not started
    publish  its commit is done, its publish has not started
    swap     its version is copied, the link not yet swapped

The fault is injected here, by wrapping the function at that point in this process only.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines.dataflow import Pipeline
from pipelines.runtime import Runtime
from pipelines.sinks import SinkDirectory
from pipelines.spark import spark_session
from progress.ledger import Ledger

SALES = T.StructType(
    [T.StructField("item", T.StringType()), T.StructField("amount", T.DoubleType())]
)
ARROW = pa.schema([("item", pa.string()), ("amount", pa.float64())])
SINK_PATH = "exports/totals"


def totals(df: DataFrame) -> DataFrame:
    return df.groupBy("item").agg(F.sum("amount").alias("total"))


def pipeline() -> Pipeline:
    p = Pipeline("sales")
    sales = p.source("sales", schema=SALES)
    p.sink("export", p.transform("totals", sales, fn=totals), path=SINK_PATH)
    return p


def runtime(home: Path, spark: Any) -> Runtime:
    return Runtime(pipeline(), Ledger(home / "ledger.duckdb"), spark, home / "data")


def write_input(root: Path, epoch: int) -> Path:
    """A seeded input file for ``epoch``: a few sales of three items."""
    items = ["tea", "jam", "bread"]
    rows = {
        "item": [items[(epoch + i) % 3] for i in range(epoch + 4)],
        "amount": [round(1.5 * (epoch + 1) + i, 2) for i in range(epoch + 4)],
    }
    path = root / f"sales-{epoch}.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(rows, schema=ARROW), path)
    return path


def send(rt: Runtime, files: dict[int, Path]) -> None:
    """Send one file per epoch (checked and copied: no Spark job), then close the source."""
    handle = rt.input("sales")
    for epoch in sorted(files):
        handle.advance_to(epoch)
        handle.send(files[epoch])
    handle.close()


def oracle(files: dict[int, Path]) -> list[tuple[int, str, float]]:
    """Every epoch's totals, ``(epoch, item, total)``, in plain DuckDB SQL over the inputs."""
    con = duckdb.connect()
    out: list[tuple[int, str, float]] = []
    for epoch, path in sorted(files.items()):
        rows = con.execute(
            "SELECT item, round(sum(amount), 6) FROM read_parquet(?) GROUP BY item", [str(path)]
        ).fetchall()
        out += [(epoch, item, total) for item, total in rows]
    con.close()
    return sorted(out)


def published(root: Path) -> list[tuple[int, str, float]]:
    """What a reader of the sink's path finds, ``(epoch, item, total)``, through DuckDB."""
    if not any(root.glob("epoch=*")):
        return []
    con = duckdb.connect()
    rows = con.execute(
        "SELECT epoch, item, round(total, 6) FROM read_parquet(?, hive_partitioning = true)",
        [f"{root}/*/*.parquet"],
    ).fetchall()
    con.close()
    return sorted((int(e), item, total) for e, item, total in rows)


def _die_before(owner: Any, name: str, hit: Callable[..., bool]) -> None:
    original = getattr(owner, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if hit(*args, **kwargs):
            os.kill(os.getpid(), signal.SIGKILL)
        return original(*args, **kwargs)

    setattr(owner, name, wrapper)


def _main(home: Path, point: str, epoch: int, revise: bool) -> None:
    if point == "commit":
        key = f"run:export:{epoch}"
        _die_before(Ledger, "commit", lambda _self, _p, _batch, **kw: kw.get("key") == key)
    elif point == "publish":
        _die_before(SinkDirectory, "publish", lambda _self, e, *_: e == epoch)
    elif point == "swap":
        _die_before(SinkDirectory, "_point", lambda _self, e, *_: e == epoch)
    else:
        raise SystemExit(f"unknown point {point!r}")
    rt = runtime(home, spark_session("local[1]", {"spark.sql.shuffle.partitions": "1"}))
    if revise:
        rt.revise("export", [epoch])
    else:
        rt.run()
    print("finished without being killed", flush=True)


if __name__ == "__main__":
    _main(Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4:] == ["revise"])
