"""Hostile captured streams: a garbage or empty log, data files named outside the capture
(``..``, an absolute path, a link that points out), data files of another schema, not Parquet
or empty. Each is refused with an ``EpochgateError`` naming the stream, the event and the rule
(or the file and the column) and nothing of it is committed; a stream whose rows hold quotes,
SQL, ``..`` and unicode replays exactly. No Spark: feeding a replayed source needs none.
(Protocol breaks, flipped bytes and truncated logs:
``tests/pipelines/capture/test_replay_refusals.py``.)"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines.capture import log as capture_log
from pipelines.errors import InputValidationError
from pipelines.run.runtime import Runtime
from pipelines.stages.pipeline import Pipeline
from progress.capture import DataFile, Messages, Rule, StreamError
from progress.errors import EpochgateError
from progress.ledger import Ledger
from tests.faults import invariants
from tests.faults.hostile import NAMES, check_nothing_committed, committed
from tests.faults.recorder import Recorder
from tests.fixtures.handmade_captures import Capture, advance

pytestmark = [pytest.mark.faults, pytest.mark.ledger]

ROWS = [(name, i) for i, name in enumerate(NAMES)]


def no_spark() -> Any:
    raise AssertionError("feeding a replayed source needs no Spark")


def _outside(c: Capture, name: str, table: pa.Table | None = None) -> DataFile:
    """A file beside the capture directory, outside it, and its entry as an event names it."""
    path = c.directory.parent / name
    pq.write_table(table if table is not None else _table(ROWS), path)
    return DataFile(name, 1, path.stat().st_size, capture_log.sha256(path))


def _table(rows: list[tuple[str, int]]) -> pa.Table:
    return pa.table({"account": [r[0] for r in rows], "amount": [r[1] for r in rows]})


def _inside(c: Capture, table: pa.Table | None = None, raw: bytes | None = None) -> DataFile:
    """A data file inside the capture: ``table`` as Parquet, or ``raw`` bytes."""
    path = c.directory / "data" / "odd.parquet"
    if raw is not None:
        path.write_bytes(raw)
    else:
        pq.write_table(table, path)
    return DataFile("data/odd.parquet", 1, path.stat().st_size, capture_log.sha256(path))


def _dotdot(c: Capture) -> None:
    entry = _outside(c, "outside.parquet")
    c.add(Messages(0, (DataFile("../outside.parquet", 1, entry.bytes, entry.sha256),)))


def _absolute(c: Capture) -> None:
    entry = _outside(c, "outside.parquet")
    path = str(c.directory.parent / entry.path)
    c.add(Messages(0, (DataFile(path, 1, entry.bytes, entry.sha256),)))


def _link_out(c: Capture) -> None:
    entry = _outside(c, "outside.parquet")
    link = c.directory / "data" / "in.parquet"
    link.symlink_to(c.directory.parent / entry.path)
    c.add(Messages(0, (DataFile("data/in.parquet", 1, entry.bytes, entry.sha256),)))


def _garbage(c: Capture) -> None:
    c.log.write_bytes(bytes(range(256)) * 4)


def _empty(c: Capture) -> None:
    c.log.write_bytes(b"")


def _other_schema(c: Capture) -> None:
    table = pa.table({"account": pa.array([1], pa.int64()), "amount": pa.array(["1"])})
    c.add(Messages(0, (_inside(c, table),)))


def _not_parquet(c: Capture) -> None:
    c.add(Messages(0, (_inside(c, raw=b"PAR1 not really PAR1"),)))


def _empty_file(c: Capture) -> None:
    c.add(Messages(0, (_inside(c, raw=b""),)))


CASES: dict[str, tuple[Callable[[Capture], None], type[EpochgateError], Rule | None]] = {
    "a data file named with ..": (_dotdot, StreamError, Rule.ESCAPING_PATH),
    "a data file named by an absolute path": (_absolute, StreamError, Rule.ESCAPING_PATH),
    "a data link that points out": (_link_out, StreamError, Rule.ESCAPING_PATH),
    "a garbage log": (_garbage, EpochgateError, None),
    "an empty log": (_empty, EpochgateError, None),
    "a data file of another schema": (_other_schema, InputValidationError, None),
    "a data file that is not Parquet": (_not_parquet, InputValidationError, None),
    "an empty data file": (_empty_file, InputValidationError, None),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_hostile_stream_is_refused_with_nothing_committed(
    tmp_path: Path, case: str, recorder: Recorder
) -> None:
    make, error, rule = CASES[case]
    c = Capture(tmp_path / "capture")
    tally = invariants.Tally()
    p = Pipeline("rehostile")
    p.transform("copy", p.replay("payments", c.directory), fn=lambda df: df)
    rt = Runtime(p, Ledger(tmp_path / "ledger.duckdb"), no_spark, tmp_path / "data")
    assert rt.replay() == 0  # a header, no event yet
    make(c)
    before = committed(rt)
    with pytest.raises(error) as caught:
        rt.replay()
    err = caught.value
    if isinstance(err, StreamError):
        assert err.stream == str(c.directory)
        assert rule is None or (err.rule, err.index) == (rule, 0)
    if isinstance(err, InputValidationError):
        assert err.file is not None
        assert err.file.endswith("data/odd.parquet")
        assert (err.stage, err.epoch) == ("payments", 0)
    check_nothing_committed(tally, rt, before, case)
    assert not list((tmp_path / "data").rglob("outside.parquet"))  # nothing linked in
    recorder.campaign("hostile input").checked(tally)
    assert tally.problems == []


def test_hostile_strings_in_a_stream_replay_exactly(tmp_path: Path, recorder: Recorder) -> None:
    c = Capture(tmp_path / "capture")
    c.add(c.messages(0, ROWS), advance(0, 1))
    p = Pipeline("rehostile")
    p.replay("payments", c.directory)
    rt = Runtime(p, Ledger(tmp_path / "ledger.duckdb"), no_spark, tmp_path / "data")
    assert rt.replay() == 2
    tally = invariants.Tally()
    got = invariants.committed_rows(rt, "payments", 0, ["account", "amount"])
    tally.rows_equal("replayed hostile strings", got, ROWS)
    tally.check(rt.ledger.verify("rehostile").ok, "ledger verify failed")
    recorder.campaign("hostile input").checked(tally)
    assert tally.problems == []


def test_a_capture_directory_named_with_dotdot_is_the_directory_it_names(tmp_path: Path) -> None:
    """A user's own path may hold ``..``: it names the directory it resolves to, no other."""
    c = Capture(tmp_path / "a" / "capture")
    c.add(c.messages(0, ROWS[:2]))
    (tmp_path / "b").mkdir()
    p = Pipeline("rehostile")
    p.replay("payments", tmp_path / "b" / ".." / "a" / "capture")
    rt = Runtime(p, Ledger(tmp_path / "ledger.duckdb"), no_spark, tmp_path / "data")
    assert rt.replay() == 1
    rows = invariants.committed_rows(rt, "payments", 0, ["account", "amount"])
    assert sorted(rows) == sorted(ROWS[:2])
    shutil.rmtree(tmp_path / "b")
    assert os.path.isdir(tmp_path / "a" / "capture")
