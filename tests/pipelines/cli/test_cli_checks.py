"""``epochgate checks`` lists what the expectations found (text and JSON), ``epochgate read
--quarantine`` prints the rows a drop expectation removed, and ``epochgate status`` names a run
that a fail expectation stopped; checked against DuckDB SQL over the raw file."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines.cli.main import main
from pipelines.stages.pipeline import Pipeline
from tests.pipelines.cli.places import on, run

pytestmark = pytest.mark.spark

ROWS = T.StructType([T.StructField("k", T.LongType()), T.StructField("v", T.LongType())])


def checked() -> Pipeline:
    p = Pipeline("checked")
    rows = p.source("rows", schema=ROWS, workers=1)
    kept = p.transform("kept", rows, fn=lambda df: df.withColumn("v", F.col("v") * 10))
    p.expect(kept, "positive", "v > 0", on_fail="drop")
    total = p.transform("total", kept, fn=lambda df: df.agg(F.sum("v").alias("v")))
    p.expect(total, "small", "v < 50", on_fail="fail")
    return p


PIPELINE = checked()
REF = "tests.pipelines.cli.test_cli_checks:PIPELINE"


def test_checks_quarantine_and_a_stopped_run_from_the_command_line(
    tmp_path: Path, spark: SparkSession, capsys: pytest.CaptureFixture[str]
) -> None:
    where = on(REF, tmp_path)

    def cli(*argv: str) -> tuple[int, str, str]:
        return run(capsys, [*argv, *where])

    raw = tmp_path / "rows.parquet"
    pq.write_table(pa.table({"k": [1, 2, 3, 4], "v": [3, -1, 5, 0]}), raw)
    assert cli("send", "rows", str(raw))[0] == 0
    assert cli("advance", "rows", "1")[0] == 0
    code, _, err = cli("run")
    assert code == 1
    # the oracle: kept = v * 10 where v > 0; total = its sum; the quarantine: v <= 0
    con = duckdb.connect()
    con.read_parquet(str(raw)).create_view("raw")
    (total,) = con.execute("SELECT sum(v * 10) FROM raw WHERE v > 0").fetchone() or (0,)
    dropped = con.execute("SELECT k, v * 10 FROM raw WHERE v <= 0 ORDER BY k").fetchall()
    assert total == 80
    assert "stage total epoch 0 failed expectation small: 1 of 1 rows" in err

    code, out, _ = cli("read", "kept", "0", "--quarantine", "--format", "csv")
    assert code == 0
    assert out.splitlines() == ["k,v", *(f"{k},{v}" for k, v in dropped)]
    code, out, err = cli("read", "total", "0")
    assert code == 3
    assert "stage total epoch 0 failed expectation small: 1 of 1 rows" in err
    assert main(["status", *where[:4]]) == 0  # it reads the ledger only: no --data
    out = capsys.readouterr().out
    assert "stage total epoch 0 failed expectation small: 1 of 1 rows" in out

    code, out, _ = cli("checks")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == [
        "stage",
        "epoch",
        "expectation",
        "action",
        "checked",
        "failing",
        "outcome",
    ]
    assert lines[1].split() == ["kept", "0", "positive", "drop", "4", "2", "committed"]
    assert lines[2].split() == ["total", "0", "small", "fail", "1", "1", "run", "stopped"]
    code, out, _ = cli("checks", "total", "--epoch", "0", "--json")
    (record,) = [json.loads(line) for line in out.splitlines()]
    assert record | {"attempt": "", "recorded_at": ""} == {
        "stage": "total",
        "epoch": 0,
        "attempt": "",
        "expectation": "small",
        "rows_checked": 1,
        "rows_failing": 1,
        "action": "fail",
        "committed": False,
        "recorded_at": "",
    }
    assert cli("checks", "nowhere")[0] != 0
