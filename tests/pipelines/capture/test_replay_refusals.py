"""Replay refuses a stream that breaks the protocol, a damaged log or data file and a foreign
version, naming the directory, the event and the rule, with nothing of the call committed (not
even the stream's valid events before the bad one); once the stream is fixed, replay resumes
where it stopped. No Spark: feeding needs none."""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pipelines.capture import log as capture_log
from pipelines.run.runtime import Runtime
from pipelines.stages.pipeline import Pipeline
from progress.capture import Messages, Progress, Rule, StreamError
from progress.ledger import Ledger
from tests.fixtures.handmade_captures import Capture, advance, done

pytestmark = pytest.mark.ledger


def no_spark() -> Any:
    raise AssertionError("feeding a replayed source needs no Spark")


def setup(tmp_path: Path) -> tuple[Capture, Runtime]:
    c = Capture(tmp_path / "capture")
    c.add(c.messages(0, [("x", 1)]), advance(0, 1), c.messages(1, [("y", 2)]))
    p = Pipeline("refusals")
    p.transform("copy", p.replay("payments", c.directory), fn=lambda df: df)
    rt = Runtime(p, Ledger(tmp_path / "ledger.duckdb"), no_spark, tmp_path / "data")
    assert rt.replay() == 3
    return c, rt


def snapshot(rt: Runtime) -> tuple[object, ...]:
    p = "refusals"
    return (
        rt.ledger.replay_positions(p, "payments"),
        [(m.time, m.attempt) for m in rt.ledger.messages(p, "payments", 0)],
        sorted(map(repr, rt.ledger.tracker(p).pointstamps())),
        rt.ledger.worker_time(p, "payments", 0),
    )


def rewrite_header(c: Capture, **changes: object) -> None:
    lines = c.log.read_bytes().splitlines(keepends=True)
    header = {k: v for k, v in json.loads(lines[0]).items() if k != "crc"}
    header.update(changes)
    body = json.dumps(header, sort_keys=True, separators=(",", ":"))
    sealed = dict(header, crc=zlib.crc32(body.encode()))
    lines[0] = (json.dumps(sealed, sort_keys=True, separators=(",", ":")) + "\n").encode()
    c.log.write_bytes(b"".join(lines))


def flip(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0x01
    path.write_bytes(bytes(data))


def message_then(*bad: Any) -> Callable[[Capture], None]:
    """A valid message at 2 (event 3), then ``bad``: a refused call commits neither."""
    return lambda c: c.add(c.messages(2, [("z", 3)]), *bad)


def truncated(c: Capture) -> None:
    """A log of version 1 (each line counts alone) cut short inside its last line; in a log of
    version 2 that line is part of an append not finished yet (``test_an_append_cut_short_...``)."""
    message_then()(c)
    rewrite_header(c, version=1)
    c.log.write_bytes(c.log.read_bytes()[:-5])


def flipped_log(c: Capture) -> None:
    message_then()(c)
    flip(c.log, len(c.log.read_bytes()) - 20)


def flipped_data(c: Capture) -> None:
    message_then()(c)
    event = capture_log.read(c.directory).events[3]
    assert isinstance(event, Messages)
    flip(c.directory / event.files[0].path, 40)


def foreign(c: Capture) -> None:
    message_then()(c)
    rewrite_header(c, version=99)


CASES: dict[str, tuple[Callable[[Capture], None], Rule, int | None]] = {
    "message without capability": (
        message_then(advance(1, 5), Messages(3)),
        Rule.MESSAGE_WITHOUT_CAPABILITY,
        5,
    ),
    "count from nothing": (message_then(Progress(((0, 1),))), Rule.COUNT_FROM_NOTHING, 4),
    "negative count": (message_then(Progress(((1, -2),))), Rule.NEGATIVE_COUNT, 4),
    "revision of an open time": (message_then(), Rule.REVISION_OF_OPEN_TIME, 4),
    "revision without message": (
        message_then(advance(1, 5), Progress(())),
        Rule.REVISION_WITHOUT_MESSAGE,
        6,
    ),
    "bad time": (message_then(Messages(-1)), Rule.BAD_TIME, 4),
    "truncated log": (truncated, Rule.TRUNCATED, 3),
    "flipped byte in the log": (flipped_log, Rule.CORRUPT, 3),
    "flipped byte in a data file": (flipped_data, Rule.DATA_MISSING, 3),
    "foreign version": (foreign, Rule.FOREIGN, None),
}


@pytest.mark.parametrize("case", CASES)
def test_a_bad_stream_is_refused_with_nothing_committed_and_resumes_once_fixed(
    tmp_path: Path, case: str
) -> None:
    damage, rule, index = CASES[case]
    c, rt = setup(tmp_path)
    good = c.log.read_bytes()
    before = snapshot(rt)
    damage(c)
    if case == "revision of an open time":
        c.add(c.revision(1, [("y", 9)]))
    if case == "revision without message":
        c.add(c.revision(4, [("y", 9)]))
    with pytest.raises(StreamError) as err:
        rt.replay()
    assert (err.value.stream, err.value.rule, err.value.index) == (
        str(c.directory),
        rule,
        index,
    )
    assert str(c.directory) in str(err.value)
    assert "nothing of it was committed" in str(err.value)
    with pytest.raises(StreamError):
        rt.run()  # run() feeds first: refused the same way, and runs nothing
    assert snapshot(rt) == before

    c.log.write_bytes(good)  # the stream fixed: its good events, then the rest
    c.add(c.messages(2, [("z", 3)]), advance(1, 3), c.revision(1, [("y", 4)]), done(3))
    assert rt.replay() == 4  # from event 3 on: nothing repeated, nothing skipped
    assert rt.ledger.replay_positions("refusals", "payments") == {_stream(c): 7}
    assert rt.ledger.worker_time("refusals", "payments", 0) is None
    current = {(m.time, m.rows) for m in rt.ledger.messages("refusals", "payments", 0)}
    assert current == {(0, 1), (1, 1), (2, 1)}
    assert rt.replay() == 0


def _stream(c: Capture) -> str:
    return capture_log.read_header(c.directory).stream


def test_a_log_cut_below_what_was_fed_is_refused(tmp_path: Path) -> None:
    """The last line cut off: the three events were one append, and none of it is left."""
    c, rt = setup(tmp_path)
    lines = c.log.read_bytes().splitlines(keepends=True)
    c.log.write_bytes(b"".join(lines[:-1]))
    with pytest.raises(StreamError) as err:
        rt.replay()
    assert (err.value.rule, err.value.index) == (Rule.TRUNCATED, 0)
    assert "3 events of it were fed already, and the log holds 0" in str(err.value)


def test_an_append_cut_short_is_not_there_yet_and_is_replayed_once_whole(tmp_path: Path) -> None:
    """Version 2: a log whose last append is cut short (a writer inside its write, or killed
    there) replays as the events before that append, and the append once it is whole."""
    c, rt = setup(tmp_path)
    c.add(c.messages(2, [("z", 3)]), advance(1, 3))
    whole = c.log.read_bytes()
    for cut in (5, len(whole.splitlines()[-1]) + 1):  # inside its last line; at a line's end
        c.log.write_bytes(whole[:-cut])
        assert rt.replay() == 0
    c.log.write_bytes(whole)
    assert rt.replay() == 2
    assert rt.ledger.replay_positions("refusals", "payments") == {_stream(c): 5}


def test_events_fed_in_pieces_equal_events_fed_at_once(tmp_path: Path) -> None:
    c, rt = setup(tmp_path / "a")
    c.add(c.messages(2, [("z", 3)]), advance(1, 3))
    assert rt.replay() == 2
    c.add(c.revision(1, [("y", 4)]), done(3))
    assert rt.replay() == 2
    p = Pipeline("refusals")
    p.transform("copy", p.replay("payments", c.directory), fn=lambda df: df)
    whole = Runtime(p, Ledger(tmp_path / "b.duckdb"), no_spark, tmp_path / "b")
    assert whole.replay() == 7

    def seen(r: Runtime) -> list[tuple[int, int]]:
        return [(m.time, m.rows) for m in r.ledger.messages("refusals", "payments", 0)]

    assert seen(rt) == seen(whole)
    assert snapshot(rt)[2:] == snapshot(whole)[2:]


def test_a_first_replay_refused_closes_no_worker_either(tmp_path: Path) -> None:
    c = Capture(tmp_path / "capture")
    c.add(c.messages(0, [("x", 1)]), Progress(((0, 1),)), Messages(-1))
    p = Pipeline("refusals")
    p.transform("copy", p.replay("payments", c.directory, workers=2), fn=lambda df: df)
    rt = Runtime(p, Ledger(tmp_path / "ledger.duckdb"), no_spark, tmp_path / "data")
    before = (snapshot(rt), rt.ledger.worker_time("refusals", "payments", 1))
    with pytest.raises(StreamError) as err:
        rt.replay()
    assert (err.value.rule, err.value.index) == (Rule.BAD_TIME, 2)
    assert (
        (snapshot(rt), rt.ledger.worker_time("refusals", "payments", 1))
        == before
        == (
            before[0],
            0,
        )
    )
