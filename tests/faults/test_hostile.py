"""Hostile input through the Python API, the command line and keyed reads: corrupt and empty
Parquet, wrong schemas, null keys, names with quotes, ``..``, ``/``, unicode and SQL, huge
values, a file rewritten while it is sent. Each input is either refused with an
``EpochgateError`` subclass naming what it involves and nothing committed
(``hostile.check_nothing_committed``), or legal and answered exactly as plain DuckDB SQL over
the raw rows answers it (``hostile.oracle``). Captured streams: ``test_hostile_streams.py``;
Dagster: ``test_hostile_dagster.py``."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from pipelines import Pipeline, PipelineDefinitionError
from pipelines.cli.main import main
from pipelines.errors import (
    InputChangedError,
    InputValidationError,
    InvalidEpochError,
    StateReadError,
)
from pipelines.run.runtime import Runtime
from pipelines.testing import throwaway_runtime
from progress.errors import EpochgateError, InvalidInputTimeError
from progress.ledger import release_all
from tests.faults import hostile
from tests.faults.hostile import (
    LONGEST,
    NAMES,
    REF,
    ROWS,
    Committed,
    check_nothing_committed,
    committed,
)
from tests.faults.invariants import Tally
from tests.faults.recorder import Recorder

pytestmark = [pytest.mark.faults, pytest.mark.spark, pytest.mark.slow(80)]

CAMPAIGN = "hostile input"


@dataclass
class World:
    """``hostile`` with epoch 0 (``ROWS``) done and ``moves`` at epoch 1; a CLI on its files."""

    rt: Runtime
    root: Path
    files: Path
    tally: Tally

    def unchanged(self, before: Committed, what: str) -> None:
        """Nothing was committed since ``before`` (``hostile.check_nothing_committed``)."""
        check_nothing_committed(self.tally, self.rt, before, what)
        assert self.tally.problems == []

    def names(self) -> set[str]:
        """Every file and directory name under the root, once every file this process keeps
        attached between uses (the ledger of the runtime, and of each command run here) is
        let go: a ledger attached after a write has a write-ahead log beside it (``.wal``),
        gone once it is detached, so only a settled listing says what the actions made."""
        release_all()
        return hostile.names_under(self.root)

    def cli(self, *argv: str) -> int:
        """``epochgate ARGV`` in this process, on this world's ledger: its exit status."""
        where = ["--ledger", str(self.root / "ledger.duckdb"), "--data", str(self.rt.store.root)]
        return main([*argv, *where])


@pytest.fixture(scope="module")
def world(
    tmp_path_factory: pytest.TempPathFactory, spark: SparkSession, recorder: Recorder
) -> Iterator[World]:
    root = tmp_path_factory.mktemp("hostile")
    files = root.parent / f"{root.name}-files"
    files.mkdir()
    tally = Tally()
    with throwaway_runtime(hostile.pipeline(), spark, home=root) as rt:
        rt.input("moves").send(hostile.write(files / "epoch0.parquet", ROWS))
        rt.input("moves").advance_to(1)
        rt.run()
        yield World(rt, root, files, tally)
    recorder.campaign(CAMPAIGN).checked(tally)


def refused(world: World, what: str, action: Callable[[], object], error: type[Exception]) -> Any:
    """Run ``action``: it must raise ``error``, an ``EpochgateError`` (each test then checks
    once that none of its refused actions committed anything: ``World.unchanged``)."""
    with pytest.raises(error) as caught:
        action()
    assert isinstance(caught.value, EpochgateError), what
    return caught.value


# -- files ---------------------------------------------------------------------------------------


def _corrupt(path: Path) -> None:
    path.write_bytes(b"PAR1" + bytes(range(256)) * 2 + b"PAR1")


def _truncated(path: Path) -> None:
    whole = hostile.write(path, ROWS).read_bytes()
    path.write_bytes(whole[: len(whole) // 2])


def _columns(**columns: pa.Array) -> Callable[[Path], None]:
    def make(path: Path) -> None:
        pq.write_table(pa.table(columns), path)

    return make


def _corrupt_part(path: Path) -> None:  # a directory: Spark reads it
    path.mkdir()
    (path / "part-0.parquet").write_bytes(b"not parquet")


ONE = pa.array([1], pa.int64())
FILES: dict[str, tuple[Callable[[Path], None] | None, str | None, str]] = {
    # case: (how the file is made, the column named, what the error says)
    "corrupt": (_corrupt, None, "cannot read Parquet"),
    "truncated": (_truncated, None, "cannot read Parquet"),
    "empty": (lambda p: p.write_bytes(b""), None, "cannot read Parquet"),
    "missing": (None, None, "no such file"),
    "no cents": (_columns(id=ONE, name=pa.array(["x"])), "cents", "missing column"),
    "id as text": (
        _columns(id=pa.array(["1"]), name=pa.array(["x"]), cents=ONE),
        "id",
        "has type string",
    ),
    "extra": (
        _columns(id=ONE, name=pa.array(["x"]), cents=ONE, extra=ONE),
        "extra",
        "unexpected column",
    ),
    "null key": (
        _columns(id=pa.array([None], pa.int64()), name=pa.array(["x"]), cents=ONE),
        "id",
        "null key",
    ),
    "null key, columns reordered": (
        _columns(cents=ONE, id=pa.array([5, None], pa.int64())[1:], name=pa.array(["x"])),
        "id",
        "null key",
    ),
    "unsigned beyond a long": (
        _columns(id=ONE, name=pa.array(["x"]), cents=pa.array([2**64 - 1], pa.uint64())),
        "cents",
        "expected bigint",
    ),
    "directory with a corrupt part": (_corrupt_part, None, "cannot read Parquet"),
}


@pytest.mark.parametrize("case", list(FILES))
def test_a_bad_file_is_refused_by_send_correct_and_the_cli(world: World, case: str) -> None:
    before = committed(world.rt)
    make, column, says = FILES[case]
    path = world.files / f"{case.replace(' ', '-')}.parquet"
    if make is not None and not path.exists():
        make(path)
    err = refused(
        world, f"send {case}", lambda: world.rt.input("moves").send(path), InputValidationError
    )
    assert (err.pipeline, err.stage, err.worker, err.epoch) == ("hostile", "moves", 0, 1)
    assert (err.file, err.column) == (str(path), column)
    assert says in err.reason
    assert "nothing was committed" in str(err)
    assert ".epochgate" not in str(err)
    assert "-in/" not in str(err)
    err = refused(
        world,
        f"correct {case}",
        lambda: world.rt.input("moves").correct(0, path),
        InputValidationError,
    )
    assert (err.epoch, err.file, err.column) == (0, str(path), column)
    assert world.cli("send", "-p", REF, "moves", str(path)) == 1
    world.unchanged(before, "a bad file is refused by send correct and the cli")


def test_bad_frames_are_refused_naming_the_column(world: World, spark: SparkSession) -> None:
    before = committed(world.rt)
    rt = world.rt
    nulls = spark.createDataFrame([(None, "x", 1)], hostile.MOVES)
    err = refused(
        world, "frame with a null key", lambda: rt.input("moves").send(nulls), InputValidationError
    )
    assert (err.column, err.file, err.epoch) == ("id", None, 1)
    text = spark.createDataFrame([("1", "x", 1)], "id string, name string, cents long")
    err = refused(
        world, "frame with a text id", lambda: rt.input("moves").send(text), InputValidationError
    )
    assert err.column == "id"
    world.unchanged(before, "bad frames are refused naming the column")


# -- names ---------------------------------------------------------------------------------------

HOSTILE_NAMES = [
    "../moves",
    "a/b",
    "/etc/passwd",
    "x'; DROP TABLE batches; --",
    "zoë",
    "",
    "moves\x00",
]


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_a_hostile_name_is_refused_everywhere_and_never_becomes_a_path(
    world: World, name: str
) -> None:
    before = committed(world.rt)
    rt, known = world.rt, world.names()
    actions: dict[str, Callable[[], object]] = {
        "input": lambda: rt.input(name, 0),
        "read": lambda: rt.read(name, 0),
        "run_stage": lambda: rt.run_stage(name, 0),
        "revise": lambda: rt.revise(name, [0]),
        "backfill": lambda: rt.backfill(name, [0]),
        "lookup": lambda: rt.lookup(name, [1]),
        "evict": lambda: rt.evict(name, [1]),
        "state_info": lambda: rt.state_info(name),
        "blockers": lambda: rt.blockers(name, 0),
        "capture": lambda: rt.capture(name, into=world.files / "never"),
    }
    for what, action in actions.items():
        err = refused(world, f"{what} {name!r}", action, EpochgateError)
        assert repr(name) in str(err) or name in str(err), (what, err)
    for what, define in {
        "pipeline": lambda: Pipeline(name),
        "source": lambda: Pipeline("p").source(name, schema=hostile.MOVES),
        "transform": lambda: _transform(name),
    }.items():
        with pytest.raises(PipelineDefinitionError) as caught:
            define()
        assert caught.value.argument == "name" or caught.value.stage == name, what
    for argv in (
        ["send", "-p", REF, name, str(world.files / "epoch0.parquet")],
        ["advance", "-p", REF, name, "3"],
        ["lookup", "-p", REF, name, "--key", "1"],
        ["send", "-p", name, "moves", str(world.files / "epoch0.parquet")],
    ):
        assert world.cli(*argv) == 1, argv
    assert world.names() == known  # no directory named after it, anywhere
    assert not (world.root.parent / "never").exists()
    assert not (world.files / "never").exists()
    world.unchanged(before, "a hostile name is refused everywhere and never becomes a path")


def _transform(name: str) -> None:
    p = Pipeline("p")
    p.transform(name, p.source("src", schema=hostile.MOVES), fn=lambda df: df)


# -- epochs and workers --------------------------------------------------------------------------

BAD_EPOCHS: list[object] = [-1, 2**63, 2**70, "0", None, 1.5, True]


@pytest.mark.parametrize("epoch", BAD_EPOCHS, ids=repr)
def test_a_value_that_is_not_an_epoch_is_refused(world: World, epoch: Any) -> None:
    before = committed(world.rt)
    rt = world.rt
    for what, action in {
        "run_stage": lambda: rt.run_stage("per_id", epoch),
        "read": lambda: rt.read("per_id", epoch),
        "revise": lambda: rt.revise("per_id", [epoch]),
        "backfill": lambda: rt.backfill("per_id", [epoch]),
    }.items():
        err = refused(world, f"{what} {epoch!r}", action, InvalidEpochError)
        assert (err.stage, err.epoch) == ("per_id", epoch), what
    for what, action in {
        "advance_to": lambda: rt.input("moves").advance_to(epoch),
        "correct": lambda: rt.input("moves").correct(epoch, world.files / "epoch0.parquet"),
    }.items():
        err = refused(world, f"{what} {epoch!r}", action, InvalidInputTimeError)
        assert (err.source, err.worker) == ("moves", 0), what
    for what, action in {
        "lookup": lambda: rt.lookup("per_id", [1], as_of=epoch),
        "request": lambda: rt.request("per_name", ["x"], as_of=epoch),
    }.items():
        if epoch is not None or what == "request":  # lookup's None: the last epoch processed
            refused(world, f"{what} {epoch!r}", action, StateReadError)
    for worker in [-1, 1, True, "0", None, 2**70]:
        refused(world, f"worker {worker!r}", _handle(rt, worker), InputValidationError)
    for argv in (
        ["advance", "-p", REF, "moves", str(2**70)],
        ["advance", "-p", REF, "moves", "-3"],
        ["send", "-p", REF, "moves", "x.parquet", "--worker", str(2**70)],
        ["backfill", "-p", REF, "per_id", "--from", "0", "--to", str(2**70)],
    ):
        assert world.cli(*argv) == 1, argv
    world.unchanged(before, "a value that is not an epoch is refused")


def _handle(rt: Runtime, worker: Any) -> Callable[[], object]:
    return lambda: rt.input("moves", worker)


# -- keys ----------------------------------------------------------------------------------------


def test_legal_hostile_keys_read_exactly_what_duckdb_reads(world: World) -> None:
    before = committed(world.rt)
    rt, tally = world.rt, world.tally
    for name in NAMES[:2]:  # a hole first (an upquery), then a hit
        for _ in range(2):
            tally.rows_equal(
                f"per_name {name!r}",
                _rows(rt.lookup("per_name", [name]).rows),
                _rows(hostile.oracle("name", [name])),
            )
    together = [*NAMES, "nobody's"]
    tally.rows_equal(
        "per_name, every name",
        _rows(rt.lookup("per_name", together).rows),
        _rows(hostile.oracle("name", together)),
    )
    for name in NAMES:  # present now: each a hit, read from the state store
        tally.rows_equal(
            f"per_name {name!r}",
            _rows(rt.lookup("per_name", [name]).rows),
            _rows(hostile.oracle("name", [name])),
        )
    ids = [LONGEST, -(2**63), 9, 0]
    tally.rows_equal(
        "per_id, extreme ids",
        _rows(rt.lookup("per_id", ids).rows),
        _rows(hostile.oracle("id", ids)),
    )
    assert rt.lookup("per_name", ["o'brien"]).rows[0]["cents"] == LONGEST  # no overflow
    assert rt.evict("per_name", ["'; DROP TABLE present; --", "x' OR '1'='1"]) == ["x' OR '1'='1"]
    tally.rows_equal(
        "per_name after an eviction",
        _rows(rt.lookup("per_name", NAMES).rows),
        _rows(hostile.oracle("name", NAMES)),
    )
    world.unchanged(before, "legal hostile keys read exactly what duckdb reads")


def test_legal_hostile_keys_on_the_command_line(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    before = committed(world.rt)
    for name in ["o'brien", "'; DROP TABLE messages; --", "zoë 🙂 名前", "../../etc/passwd"]:
        capsys.readouterr()
        assert world.cli("lookup", "-p", REF, "per_name", "--key", name, "--json") == 0
        rows = json.loads(capsys.readouterr().out)["rows"]
        world.tally.rows_equal(
            f"epochgate lookup {name!r}", _rows(rows), _rows(hostile.oracle("name", [name]))
        )
    world.unchanged(before, "legal hostile keys on the command line")


REFUSED_KEYS: list[tuple[str, object]] = [
    ("per_id", 2**63),
    ("per_id", -(2**63) - 1),
    ("per_id", "1 OR 1=1"),
    ("per_id", None),
    ("per_id", True),
    ("per_id", 1.0),
    ("per_id", (1,)),
    ("per_name", None),
    ("per_name", 1),
]


@pytest.mark.parametrize(("stage", "key"), REFUSED_KEYS, ids=repr)
def test_a_key_that_does_not_fit_is_refused(world: World, stage: str, key: object) -> None:
    before = committed(world.rt)
    rt = world.rt
    for what, action in {
        "lookup": lambda: rt.lookup(stage, [key]),
        "evict": lambda: rt.evict(stage, [key]),
    }.items():
        if what == "evict" and stage == "per_id":
            continue  # a full stage refuses any eviction
        err = refused(world, f"{what} {key!r}", action, StateReadError)
        assert (err.stage, err.key) == (stage, key), what
    if stage == "per_id" and isinstance(key, int | str) and not isinstance(key, bool):
        assert world.cli("lookup", "-p", REF, stage, "--key", str(key)) == 1
    world.unchanged(before, "a key that does not fit is refused")


def _rows(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [tuple(sorted(r.items())) for r in rows]


# -- a file that changes while it is sent --------------------------------------------------------


def test_a_file_rewritten_while_it_is_sent_is_committed_whole_or_refused(
    tmp_path: Path, spark: SparkSession, recorder: Recorder
) -> None:
    """A writer rewrites the file in place, again and again, between two versions; every send
    meanwhile commits exactly one version's rows or is refused, committing nothing."""
    versions = [ROWS[:3], [(100 + i, f"n{i}", i) for i in range(400)]]
    blobs = []
    for i, rows in enumerate(versions):
        blobs.append(hostile.write(tmp_path / f"v{i}.parquet", rows).read_bytes())
    path = tmp_path / "moving.parquet"
    path.write_bytes(blobs[0])
    stop = threading.Event()

    def rewrite() -> None:
        i = 0
        while not stop.is_set():
            i += 1
            blob = blobs[i % 2]
            with path.open("wb") as fh:  # in place: a reader can see it half written
                fh.write(blob[: len(blob) // 2])
                fh.flush()
                time.sleep(0.0005)  # the point: a window in which the file is half written
                fh.write(blob[len(blob) // 2 :])

    tally, outcomes = Tally(), {"committed": 0, "changed": 0, "corrupt": 0}
    with throwaway_runtime(hostile.pipeline(), spark, home=tmp_path / "home") as rt:
        writer = threading.Thread(target=rewrite, daemon=True)
        writer.start()
        try:
            for _ in range(40):
                before = committed(rt)
                try:
                    sent = rt.input("moves").send(path)
                except InputChangedError as err:
                    named = (err.file, err.stage, err.epoch) == (str(path), "moves", 0)
                    tally.check(named, f"a refusal that does not name the file: {err}")
                    outcomes["changed"] += 1
                    check_nothing_committed(tally, rt, before, "a send refused as changed")
                    continue
                except InputValidationError as err:  # a half-written file is not Parquet
                    named = err.file == str(path) and "cannot read Parquet" in err.reason
                    tally.check(named, f"a refusal that does not name the file: {err}")
                    outcomes["corrupt"] += 1
                    check_nothing_committed(tally, rt, before, "a send refused as corrupt")
                    continue
                assert not sent.repeated
                outcomes["committed"] += 1
                (message,) = [
                    m
                    for m in rt.ledger.messages("hostile", "moves", 0)
                    if m not in before.messages[0][1]
                ]
                got = pq.read_table(message.path).to_pylist()
                rows = sorted((r["id"], r["name"], r["cents"]) for r in got)  # re-sorted
                tally.check(
                    rows in [sorted(v) for v in versions],
                    f"a committed send holds a torn file: {len(rows)} rows",
                )
                tally.check(
                    message.rows == len(rows), f"message rows {message.rows} != {len(rows)}"
                )
        finally:
            stop.set()
            writer.join()
        tally.check(rt.ledger.verify("hostile").ok, "ledger verify failed")
        staged = list(rt.store.root.rglob("attempt=*-in"))
        tally.check(not staged, f"private copies left behind: {staged}")
    recorder.campaign(CAMPAIGN).checked(tally)
    assert tally.problems == [], (tally.problems, outcomes)
    assert sum(outcomes.values()) == 40


def test_a_file_replaced_by_rename_while_it_is_sent_always_commits_one_version(
    tmp_path: Path, spark: SparkSession
) -> None:
    versions = [ROWS[:3], ROWS[3:]]
    path = tmp_path / "renamed.parquet"
    hostile.write(path, versions[0])
    stop = threading.Event()

    def replace() -> None:
        i = 0
        while not stop.is_set():
            i += 1
            new = hostile.write(tmp_path / f"new{i % 2}.parquet", versions[i % 2])
            os.replace(new, path)

    with throwaway_runtime(hostile.pipeline(), spark, home=tmp_path / "home") as rt:
        writer = threading.Thread(target=replace, daemon=True)
        writer.start()
        try:
            for _ in range(15):
                rt.input("moves").send(path)
        finally:
            stop.set()
            writer.join()
        for m in rt.ledger.messages("hostile", "moves", 0):
            assert m.path is not None
            got = [(r["id"], r["name"], r["cents"]) for r in pq.read_table(m.path).to_pylist()]
            assert sorted(got) in [sorted(v) for v in versions]
