"""``epochgate check``: a sound pipeline printed as a tree, every problem of a flawed one listed,
and a module that cannot load or define its pipeline shown as its one error."""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from pipelines import Pipeline
from pipelines.cli.main import main
from pipelines.cli.validation import validate
from progress.ledger import Ledger, Registration
from tests.fixtures.clicks import CLICKS
from tests.pipelines.cli.checked import FLAWED, SOUND, sound

pytestmark = pytest.mark.spark


def check(tmp_path: Path, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    where = ["--ledger", str(tmp_path / "home" / "ledger.duckdb"), "--data", str(tmp_path / "d")]
    code = main(["check", *argv, *where])
    out, err = capsys.readouterr()
    return code, out, err


SOUND_TREE = """\
pipeline sound: 8 stages, 7 edges
  orders  [source, key: order_id, delay: 0, workers: 2]  columns: order_id, customer, amount
  `-- valid  [transform, key: -, delay: 0]  columns: order_id, customer, amount
      |-- named  [join, key: -, delay: 0]  columns: customer, order_id, amount, region
      |   `-- regions  [aggregate, key: region, delay: 0]  columns: region, total
      |       `-- export  [sink, key: -, delay: 0, path: out/regions]
      |-- per_customer  [aggregate, key: customer, delay: 0, partial]  columns: customer, orders
      `-- later  [transform, key: -, delay: 1]  columns: order_id, customer, amount
  customers  [dimension, key: customer, delay: 0, workers: 1]  columns: customer, region
  `-- named  (shown above)
ok: every rule holds, columns derived over empty inputs; nothing was run
"""


def test_a_sound_pipeline_is_printed_as_a_tree(
    tmp_path: Path, spark: SparkSession, capsys: pytest.CaptureFixture[str]
) -> None:
    assert check(tmp_path, capsys, "-p", SOUND) == (0, SOUND_TREE, "")
    assert not (tmp_path / "home").exists()  # nothing registered, nothing written


def test_every_problem_of_a_flawed_pipeline_is_listed(
    tmp_path: Path, spark: SparkSession, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = check(tmp_path, capsys, "-p", FLAWED)
    assert (code, out) == (1, "")
    lines = err.splitlines()
    assert lines[0].startswith(
        "epochgate: pipeline 'flawed', stage 'broken': over empty input, its function fails: "
        "[UNRESOLVED_COLUMN.WITH_SUGGESTION] A column, variable, or function parameter with name "
        "`no_such_column` cannot be resolved."
    )
    assert lines[1:] == [
        "epochgate: pipeline 'flawed', stage 'per_customer': key column(s) ['customer'] not in "
        "its input 'dropped', whose columns over empty input are order_id, amount",
        "epochgate: pipeline 'flawed', stage 'running': state column 'total' is missing, the "
        "schema says double",
        "epochgate: pipeline 'flawed', stage 'joined': join column(s) ['customer'] not in the "
        "left input 'dropped', whose columns over empty input are order_id, amount",
        "epochgate: pipeline 'flawed', stage 'second': publishes to "
        f"{tmp_path / 'home' / 'out' / 'same'}, as sink 'first' does",
        "epochgate: 5 problem(s) in pipeline 'flawed'; nothing was run",
    ]


MODULES = {
    "checked_typo": "def pipeline(:\n",
    "checked_refused": (
        "from pipelines import Pipeline\n"
        "from tests.fixtures.clicks import CLICKS\n\n"
        "def pipeline():\n"
        "    p = Pipeline('refused')\n"
        "    p.source('clicks', schema=CLICKS, key=['nope'])\n"
        "    return p\n"
    ),
}


def test_a_module_that_cannot_load_or_define_its_pipeline_shows_that_error(
    tmp_path: Path,
    spark: SparkSession,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    for module, text in MODULES.items():
        (tmp_path / f"{module}.py").write_text(text)
    code, out, err = check(tmp_path, capsys, "-p", "checked_typo:pipeline")
    assert (code, out) == (1, "")
    assert err.startswith("epochgate: cannot load pipeline 'checked_typo:pipeline': SyntaxError: ")
    assert err.endswith(f"({tmp_path / 'checked_typo.py'}, line 1)\n")
    code, out, err = check(tmp_path, capsys, "-p", "checked_refused:pipeline")
    assert (code, out) == (1, "")
    assert err == (
        "epochgate: pipeline 'refused', stage 'clicks', argument 'key': key columns ['nope'] "
        "not in schema (its columns: click_id, page)\n"
    )


def test_check_records_where_a_registered_pipeline_is(
    tmp_path: Path, spark: SparkSession, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger = Ledger(tmp_path / "home" / "ledger.duckdb")
    sound().register(ledger)
    assert check(tmp_path, capsys, "-p", SOUND)[0] == 0
    assert ledger.registrations() == [Registration("sound", SOUND)]
    assert check(tmp_path, capsys)[1] == SOUND_TREE  # the ledger's only one, found again


def test_partial_state_feeds_and_loops_are_checked_whole(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Rules a definition refuses at once, met in a pipeline assembled some other way: each
    is listed."""
    p = Pipeline("assembled")
    clicks = p.source("clicks", schema=CLICKS, key=["click_id"])
    p.aggregate("seen", clicks, key=["page"], aggs={"n": ("count", None)}, partial=True)
    p.aggregate("again", "seen", key=["page"], aggs={"m": ("sum", "n")}, partial=True)
    p.feedback("back", delay=1)
    stages = p._stages  # a full reader of a partial stage cannot be defined: made here
    stages["again"] = dataclasses.replace(stages["again"], partial=None)
    found = validate(p, spark, home=tmp_path, data=tmp_path / "data")
    assert [str(e) for e in found.problems] == [
        "pipeline 'assembled', stage 'again', argument 'partial': partial stage 'seen' feeds "
        "full stage 'again': its output omits keys that were never read",
        "pipeline 'assembled', stage 'back': feedback was never connected (Pipeline.connect)",
    ]


def test_sinks_are_checked_against_each_other_and_the_home(
    spark: SparkSession, tmp_path: Path
) -> None:
    home, data = tmp_path / "home", tmp_path / "home" / "data"
    (tmp_path / "taken").write_text("a file")
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    p = Pipeline("published")
    clicks = p.source("clicks", schema=CLICKS)
    p.sink("outer", clicks, path="out")
    p.sink("inner", clicks, path="out/inner")
    p.sink("in_data", clicks, path="data/x")
    p.sink("file", clicks, path=str(tmp_path / "taken"))
    p.sink("fine", clicks, path=str(tmp_path / "elsewhere" / "deep"))
    p.sink("closed", clicks, path=str(locked / "x"))
    found = validate(p, spark, home=home, data=data)
    problems = [(e.stage, e.reason) for e in found.problems]
    assert (
        "inner",
        f"publishes to {home / 'out/inner'}, inside sink 'outer''s {home / 'out'}",
    ) in problems
    assert (
        "in_data",
        f"publishes to {data / 'x'}, which overlaps the data directory {data}",
    ) in problems
    assert (
        "file",
        f"publishes to {tmp_path / 'taken'}, which is a file, not a directory",
    ) in problems
    assert not [s for s, _ in problems if s in ("outer", "fine")]
    if os.geteuid() != 0:  # root writes anywhere
        assert (
            "closed",
            f"publishes to {locked / 'x'}, but {locked} cannot be written",
        ) in problems
    assert found.columns["clicks"] == CLICKS

    above = Pipeline("above")
    above.sink("up", above.source("clicks", schema=CLICKS), path=str(tmp_path))
    (problem,) = validate(above, spark, home=home, data=data).problems
    assert problem.reason == f"publishes to {tmp_path}, which holds the runtime's home {home}"
