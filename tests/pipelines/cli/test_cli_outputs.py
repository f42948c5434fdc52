"""``epochgate read`` and ``tail``: a stage's output printed only once its epoch is final (exit 3
naming the holder otherwise), in every format, checked against DuckDB SQL over the raw files."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from pipelines.run.runtime import Runtime
from progress.ledger import Ledger
from tests.pipelines.cli.places import on, run
from tests.pipelines.reads.test_subscription import numbers, write
from tests.sockets import free_port

pytestmark = pytest.mark.spark

PIPELINE = numbers()
REF = "tests.pipelines.cli.test_cli_outputs:PIPELINE"


def oracle(files: list[Path]) -> list[tuple[int, int]]:
    return sorted(duckdb.read_parquet([str(f) for f in files]).fetchall())


def test_read_prints_final_epochs_only_and_tail_prints_each_final_epoch(
    tmp_path: Path, spark: SparkSession, capsys: pytest.CaptureFixture[str]
) -> None:
    where = on(REF, tmp_path)

    def cli(*argv: str) -> tuple[int, str, str]:
        return run(capsys, [*argv, *where])

    rt = Runtime(PIPELINE, Ledger(tmp_path / "ledger.duckdb"), spark, tmp_path / "data")
    files = {
        w: write(tmp_path / "raw" / f"w{w}.parquet", [10 * w + i for i in range(3)]) for w in (0, 1)
    }
    rt.input("nums", 0).send(files[0])
    rt.input("nums", 0).advance_to(1)

    code, out, err = cli("read", "big", "0")
    assert (code, out) == (3, "")
    assert err == (
        "epochgate: stage 'big' epoch 0 is not final: source nums, worker 1, still holds epoch 0\n"
    )
    code, out, _ = cli("read", "nums", "0", "--not-final", "--format", "csv")
    assert code == 0
    assert out.splitlines() == ["k,v", *(f"{k},{v}" for k, v in oracle([files[0]]))]

    rt.input("nums", 1).send(files[1])
    rt.input("nums", 1).advance_to(1)
    code, _, err = cli("read", "big", "0")
    assert (code, err) == (
        3,
        "epochgate: stage 'big' epoch 0 is not final: stage big has not run epoch 0 yet "
        "(2 message(s) waiting)\n",
    )
    assert cli("run")[0] == 0
    expected = oracle([files[0], files[1]])

    code, out, _ = cli("read", "big", "0")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["k", "v"]
    assert sorted(tuple(int(c) for c in line.split()) for line in lines[1:]) == expected
    # The files are read in this process: no engine is asked (none answers at that address).
    nowhere = ("--spark", f"sc://127.0.0.1:{free_port()}")
    assert cli("read", "big", "0", *nowhere) == (0, out, "")
    code, out, _ = cli("read", "big", "0", "--format", "json", "--limit", "2")
    rows = [json.loads(line) for line in out.splitlines()]
    assert (code, len(rows)) == (0, 2)
    assert {(r["k"], r["v"]) for r in rows} <= set(expected)
    target = tmp_path / "out.parquet"
    code, out, _ = cli("read", "big", "0", "--format", "parquet", "--out", str(target))
    assert code == 0
    assert out.strip() == f"6 row(s) of big epoch 0 written to {target}"
    assert sorted(zip(*pq.read_table(target).to_pydict().values(), strict=True)) == expected
    code, out, err = cli("read", "big", "0", "--format", "parquet")
    assert (code, out) == (1, "")
    assert err == "epochgate: --format parquet writes a file: give it with --out PATH\n"

    code, out, _ = cli("tail", "big")
    assert code == 0
    assert out.splitlines()[0] == "big epoch 0 (final): 6 row(s)"
    assert len(out.splitlines()) == 1 + 1 + 6  # the line, the header, the rows
