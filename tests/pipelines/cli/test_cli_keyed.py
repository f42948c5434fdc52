"""``epochgate lookup``, ``evict`` and ``state``: keys given as text in the key columns'
types, answers checked against DuckDB SQL over the inputs, errors on one line."""

from __future__ import annotations

import decimal
import json
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from pipelines.cli.keyed import parse_key
from pipelines.cli.main import main
from pipelines.run.runtime import Runtime
from pipelines.stages.kinds import KeyedStage
from pipelines.testing import send_epochs
from progress.ledger import Ledger
from tests.environment import without_settings
from tests.fixtures import keyed_reads
from tests.fixtures.keyed_reads import BALANCES, D1, D2, ROWS, oracle
from tests.steps import Steps

pytestmark = pytest.mark.slow(95)

REF = "tests.fixtures.keyed_reads:pipeline"
PROBE = """
import sys
from pipelines.cli.main import main

codes = [main(command.split()) for command in sys.argv[1:]]
pyspark = sys.modules.get("pyspark")
print(pyspark is not None and pyspark.SparkContext._gateway is not None)
sys.exit(max(codes))
"""
ROOT = Path(__file__).resolve().parents[3]


class Cli:
    """``epochgate`` in this process, on one ledger and data directory."""

    def __init__(self, home: Path, capsys: pytest.CaptureFixture[str]) -> None:
        self.where = ["--ledger", str(home / "ledger.duckdb"), "--data", str(home / "data")]
        self.capsys = capsys

    def __call__(self, *argv: str) -> tuple[int, str, list[str]]:
        code = main([*argv, *self.where])
        out, err = self.capsys.readouterr()
        return code, out, err.splitlines()

    def json(self, *argv: str) -> object:
        code, out, err = self(*argv, "--json")
        assert (code, err) == (0, []), err
        return json.loads(out)

    def fails(self, *argv: str) -> str:
        """The one line a failing command prints (exit 1, nothing on stdout)."""
        code, out, err = self(*argv)
        assert (code, out) == (1, ""), (code, out, err)
        (line,) = err
        assert line.startswith("epochgate: ")
        return line.removeprefix("epochgate: ")


BALANCE_SQL = """
    SELECT account, sum(cents) AS balance, count(*) AS n FROM moves
    WHERE epoch <= {epoch} AND account IN ({keys}) GROUP BY account ORDER BY account"""


@pytest.mark.unit
def test_a_key_is_converted_to_its_columns_types() -> None:
    from pyspark.sql import types as T

    p = keyed_reads.pipeline()
    per_day, balances, per_kind = (p.stage(s) for s in ("per_day", "balances", "per_kind"))
    assert isinstance(per_day, KeyedStage)
    assert isinstance(balances, KeyedStage)
    assert isinstance(per_kind, KeyedStage)
    assert parse_key(per_day, [T.LongType(), T.DateType()], "7,2026-01-02") == (7, D2)
    assert parse_key(balances, [T.LongType()], " 12 ") == 12
    assert parse_key(per_kind, [T.StringType()], "a,b") == "a,b"  # one column: commas are text
    assert parse_key(per_kind, [T.DoubleType()], "2.5") == 2.5
    assert parse_key(per_kind, [T.DecimalType(10, 2)], "2.50") == decimal.Decimal("2.50")
    assert parse_key(per_kind, [T.BooleanType()], "True") is True


@pytest.mark.ledger
def test_a_lookup_that_fails_registers_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cli = Cli(tmp_path, capsys)
    assert cli.fails("lookup", "nope", "--key", "1", "-p", REF).startswith(
        "pipeline 'ledgers', stage 'nope': no such stage"
    )
    assert cli.fails("lookup", "balances", "--key", "x", "-p", REF) == (
        "stage 'balances': key 'x': column 'account' is bigint, 'x' is not one"
    )
    assert Ledger(tmp_path / "ledger.duckdb").registrations() == []


@pytest.mark.spark
@dataclass
class Shell:
    """The world the shell's steps share: a runtime of ``keyed_reads`` with epochs 0 and 1
    complete and run (2 is held), its home, and the steps done."""

    rt: Runtime
    home: Path
    steps: Steps = field(default_factory=Steps)

    def cli(self, capsys: pytest.CaptureFixture[str]) -> Cli:
        return Cli(self.home, capsys)


@pytest.fixture(scope="module")
def shell(tmp_path_factory: pytest.TempPathFactory, spark: SparkSession) -> Shell:
    home = tmp_path_factory.mktemp("shell")
    rt = Runtime(keyed_reads.pipeline(), Ledger(home / "ledger.duckdb"), spark, home / "data")
    send_epochs(rt, "moves", ROWS)
    rt.input("moves").advance_to(2)  # epochs 0 and 1 are complete; 2 is held
    rt.run()
    return Shell(rt, home)


FILLED = "holes are filled by an upquery"
FROM_STATE = "a second read is answered from state"
EARLIER = "a read as of an earlier epoch"
OTHER_KEYS = "keys of two columns and of text"
HELD = "an epoch not processed says what holds it"
EVICTED = "evicted keys are holes a read fills again"
STATE = "state says what state_info says"
ERRORS = "errors name the stage and the key"


def test_holes_are_filled_by_an_upquery(shell: Shell, capsys: pytest.CaptureFixture[str]) -> None:
    def step() -> None:
        # A key with no input rows (9) has no row.
        cli = shell.cli(capsys)
        code, out, err = cli(
            "lookup", "balances", "--key", "1", "--key", "2", "--key", "9", "-p", REF
        )
        assert (code, err) == (0, [])
        lines = out.splitlines()
        assert lines[0].startswith("balances as of epoch 1: 2 row(s) in ")
        assert lines[1].split() == BALANCES.fieldNames()
        expected = oracle(BALANCE_SQL.format(epoch=1, keys="1, 2, 9"))
        assert [tuple(int(v) for v in line.split()) for line in lines[2:4]] == expected
        assert lines[4:] == ["hits: -", "upqueried: 1, 2, 9", "no state row: 9"]

    shell.steps.once(FILLED, step)


def test_a_second_read_is_answered_from_state(
    shell: Shell, capsys: pytest.CaptureFixture[str]
) -> None:
    shell.steps.after(FILLED)

    def step() -> None:
        found = shell.cli(capsys).json(
            "lookup", "balances", "--key", "2", "--key", "1", "--key", "9"
        )
        assert isinstance(found, dict)
        assert set(found) == {"rows", "hits", "upqueried", "as_of", "seconds"}
        assert (found["hits"], found["upqueried"], found["as_of"]) == ([2, 1, 9], [], 1)
        expected = oracle(BALANCE_SQL.format(epoch=1, keys="1, 2, 9"))
        assert [tuple(r.values()) for r in found["rows"]] == sorted(expected, reverse=True)

    shell.steps.once(FROM_STATE, step)


def test_a_read_as_of_an_earlier_epoch(shell: Shell, capsys: pytest.CaptureFixture[str]) -> None:
    shell.steps.after(FROM_STATE)

    def step() -> None:
        earlier = shell.cli(capsys).json("lookup", "balances", "--key", "1", "--as-of", "0")
        assert isinstance(earlier, dict)
        assert earlier["as_of"] == 0
        assert [tuple(r.values()) for r in earlier["rows"]] == oracle(
            BALANCE_SQL.format(epoch=0, keys="1")
        )

    shell.steps.once(EARLIER, step)


def test_a_key_of_two_columns_and_a_text_key_of_a_full_stage(
    shell: Shell, capsys: pytest.CaptureFixture[str]
) -> None:
    shell.steps.after(EARLIER)

    def step() -> None:
        # A key of two columns (bigint, date), comma-separated; a text key of a full stage.
        cli = shell.cli(capsys)
        per_day = cli.json("lookup", "per_day", "--key", "1,2026-01-01", "--key", "2,2026-01-02")
        assert isinstance(per_day, dict)
        assert per_day["upqueried"] == [[1, "2026-01-01"], [2, "2026-01-02"]]
        assert [tuple(r.values()) for r in per_day["rows"]] == [
            (a, d.isoformat(), c, n)
            for a, d, c, n in oracle(
                "SELECT account, day, sum(cents), count(*) FROM moves "
                f"WHERE (account, day) IN ((1, DATE '{D1}'), (2, DATE '{D2}')) GROUP BY ALL "
                "ORDER BY account"
            )
        ]
        kinds = cli.json("lookup", "per_kind", "--key", "card", "--key", "cash")
        assert isinstance(kinds, dict)
        assert (kinds["hits"], kinds["upqueried"]) == (["card", "cash"], [])
        assert [tuple(r.values()) for r in kinds["rows"]] == oracle(
            "SELECT kind, sum(cents), max(cents) FROM moves WHERE kind IN ('card', 'cash') "
            "GROUP BY kind ORDER BY kind"
        )

    shell.steps.once(OTHER_KEYS, step)


def test_an_epoch_not_processed_says_what_holds_it(
    shell: Shell, capsys: pytest.CaptureFixture[str]
) -> None:
    shell.steps.after(OTHER_KEYS)

    def step() -> None:
        # At once (the read of a partial stage is then recorded as a pending upquery) or after
        # --wait.
        cli = shell.cli(capsys)
        held = (
            "stage 'balances' is not ready for epoch 2: source moves, worker 0, still holds epoch 2"
        )
        recorded = (
            "; the read is recorded as a pending upquery of balances: it is filled once balances "
            "has processed epoch 2"
        )
        assert cli.fails("lookup", "balances", "--key", "1", "--as-of", "2") == held + recorded
        pending = shell.rt.ledger.pending_upqueries("ledgers", "balances")
        assert [(r.key, r.as_of) for r in pending] == [("[1]", 2)]
        started = time.monotonic()
        waited = cli.fails("lookup", "balances", "--key", "1", "--as-of", "2", "--wait", "0.5")
        assert waited == held
        assert time.monotonic() - started >= 0.5

    shell.steps.once(HELD, step)


def test_evicted_keys_are_holes_that_a_read_fills_again(
    shell: Shell, capsys: pytest.CaptureFixture[str]
) -> None:
    shell.steps.after(HELD)

    def step() -> None:
        cli = shell.cli(capsys)
        code, out, err = cli("evict", "balances", "--key", "1", "--key", "5")
        assert (code, out, err) == (0, "holes now in balances: 1\n", [])
        code, out, err = cli("evict", "balances", "--key", "1")
        nothing = "nothing evicted from balances: no key given was present\n"
        assert (code, out, err) == (0, nothing, [])
        again = cli.json("lookup", "balances", "--key", "1")
        assert isinstance(again, dict)
        assert (again["hits"], again["upqueried"]) == ([], [1])
        assert [tuple(r.values()) for r in again["rows"]] == oracle(
            BALANCE_SQL.format(epoch=1, keys="1")
        )

    shell.steps.once(EVICTED, step)


def test_state_says_what_state_info_says(shell: Shell, capsys: pytest.CaptureFixture[str]) -> None:
    shell.steps.after(EVICTED)

    def step() -> None:
        # For every keyed stage, or one.
        cli, rt = shell.cli(capsys), shell.rt
        infos = cli.json("state")
        assert isinstance(infos, list)
        assert [i["stage"] for i in infos] == ["balances", "per_day", "per_kind"]
        assert infos == [rt.state_info(i["stage"]).as_dict() for i in infos]
        by_stage = {i["stage"]: i for i in infos}
        assert by_stage["balances"]["partial"]
        assert by_stage["balances"]["present_keys"] == 3
        assert by_stage["balances"]["evictions"] >= 1
        assert by_stage["per_day"]["max_keys"] == 2
        ((kinds_count,),) = oracle("SELECT count(DISTINCT kind) FROM moves")
        assert not by_stage["per_kind"]["partial"]
        assert by_stage["per_kind"]["present_keys"] == kinds_count
        assert cli.json("state", "per_day") == [by_stage["per_day"]]
        code, out, err = cli("state")
        assert (code, err) == (0, [])
        header, *rows = out.splitlines()
        assert header.split()[:3] == ["stage", "state", "present"]
        assert [r.split()[:3] for r in rows] == [
            ["balances", "partial", "3"],
            ["per_day", "partial", str(by_stage["per_day"]["present_keys"])],
            ["per_kind", "full", str(kinds_count)],
        ]

    shell.steps.once(STATE, step)


def test_errors_name_the_stage_and_the_key(
    shell: Shell, capsys: pytest.CaptureFixture[str]
) -> None:
    shell.steps.after(STATE)

    def step() -> None:
        # Exit 1, one line.
        cli = shell.cli(capsys)
        assert cli.fails("lookup", "big", "--key", "1") == (
            "stage 'big': a transform stage keeps no keyed state (only stateful and aggregate)"
        )
        assert cli.fails("state", "big").startswith("stage 'big': a transform stage")
        assert cli.fails("lookup", "per_day", "--key", "1") == (
            "stage 'per_day': key '1': a key of 'per_day' is 2 comma-separated values "
            "(account, day)"
        )
        assert cli.fails("lookup", "per_day", "--key", "1,21/1/2026") == (
            "stage 'per_day': key '1,21/1/2026': column 'day' is date, '21/1/2026' is not one"
        )
        assert cli.fails("evict", "per_kind", "--key", "card") == (
            "stage 'per_kind': a full stage keeps every key: there is nothing to evict"
        )

    shell.steps.once(ERRORS, step)


def test_a_hit_an_eviction_and_state_start_no_jvm(
    shell: Shell, capsys: pytest.CaptureFixture[str]
) -> None:
    shell.steps.after(ERRORS)
    # A new process runs them on the state store.
    where = " ".join(shell.cli(capsys).where)
    commands = ["lookup balances --key 2 --json", "evict balances --key 2", "state balances --json"]
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *(f"{c} {where}" for c in commands)],
        cwd=shell.home,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={
            **without_settings(),
            "PYTHONPATH": str(ROOT),
        },
    )
    assert done.returncode == 0, done.stderr[-2000:]
    answer, evicted, *state, started_spark = done.stdout.splitlines()
    assert json.loads(answer)["hits"] == [2]
    assert evicted == "holes now in balances: 2"
    assert json.loads("".join(state)) == [shell.rt.state_info("balances").as_dict()]
    assert started_spark == "False"
