"""The capture directory's event log: written, read back, and refused when damaged."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from pipelines.capture import log as capture_log
from progress.capture import DataFile, Messages, Progress, Revision, Rule, StreamError

pytestmark = pytest.mark.unit


def written(tmp_path: Path) -> Path:
    d = tmp_path / "cap"
    capture_log.create(d, capture_log.new_header("bank", "balances", schema="{}"))
    data = d / "data" / "0.parquet"
    data.write_bytes(b"rows")
    f = DataFile("data/0.parquet", 3, 4, capture_log.sha256(data))
    with capture_log.locked(d):
        n = capture_log.length(d)
        capture_log.append(d, n, [Messages(0, (f,)), Progress(((1, 1), (0, -1)))], batches=[7, 7])
        capture_log.append(d, capture_log.length(d), [Revision(0, (f,))], batches=[9])
    return d


def test_round_trip_with_batches_and_data(tmp_path: Path) -> None:
    d = written(tmp_path)
    log = capture_log.read(d, check_data=True)
    assert log.header.pipeline == "bank"
    assert log.header.stage == "balances"
    assert [type(e).__name__ for e in log.events] == ["Messages", "Progress", "Revision"]
    assert log.batches == (7, 7, 9)
    assert log.last_batch == 9
    assert isinstance(log.events[0], Messages)
    assert log.events[0].rows == 3


def test_duckdb_reads_the_log_alone(tmp_path: Path) -> None:
    """With the query in the log's docs: the events through the last ``end``, not those of an
    append under way."""
    d = written(tmp_path)
    unfinished = capture_log._line(capture_log.event_json(3, Progress(((2, 1), (1, -1)))))
    with (d / capture_log.LOG).open("ab") as fh:
        fh.write(unfinished)
    log = f"read_json('{d / capture_log.LOG}', sample_size=-1)"
    rows = duckdb.sql(
        f"SELECT index, kind, time FROM {log} WHERE kind IS NOT NULL AND index <= "
        f'(SELECT max(index) FROM {log} WHERE "end") ORDER BY index'
    ).fetchall()
    assert rows == [(0, "messages", 0), (1, "progress", None), (2, "revision", 0)]


def damaged(d: Path, edit: bytes) -> StreamError:
    (d / capture_log.LOG).write_bytes(edit)
    with pytest.raises(StreamError) as err:
        capture_log.read(d)
    return err.value


def test_truncated_flipped_and_foreign_logs_are_refused(tmp_path: Path) -> None:
    d = written(tmp_path)
    good = (d / capture_log.LOG).read_bytes()
    assert damaged(d, good[: good.index(b"\n") - 5]).rule is Rule.TRUNCATED  # the header
    i = good.index(b'"time":0')
    flipped = good[: i + 7] + b"1" + good[i + 8 :]
    err = damaged(d, flipped)
    assert (err.rule, err.index) == (Rule.CORRUPT, 0)
    lines = good.splitlines(keepends=True)
    assert damaged(d, b"".join([lines[0], lines[2]])).rule is Rule.OUT_OF_ORDER
    header = capture_log.new_header("bank", "balances").as_json()
    foreign = capture_log._line(dict(header, version=9)) + b"".join(lines[1:])
    assert damaged(d, foreign).rule is Rule.FOREIGN
    assert damaged(d, good.replace(b'"version":2', b'"version":9', 1)).rule is Rule.CORRUPT
    assert damaged(d, b"").rule is Rule.TRUNCATED


def test_data_that_differs_from_its_checksum_is_refused(tmp_path: Path) -> None:
    d = written(tmp_path)
    (d / "data" / "0.parquet").write_bytes(b"ROWS")
    with pytest.raises(StreamError) as err:
        capture_log.read(d, check_data=True)
    assert err.value.rule is Rule.DATA_MISSING
    assert err.value.index == 0


def test_a_torn_last_line_is_no_part_of_the_log_and_a_writer_cuts_it(tmp_path: Path) -> None:
    """Cut short inside an append (a writer inside its write, or killed there): the events
    before that append are the log; the next writer cuts the torn line off."""
    d = written(tmp_path)
    good = (d / capture_log.LOG).read_bytes()
    (d / capture_log.LOG).write_bytes(good[:-5])  # inside the last append: a revision
    assert len(capture_log.read(d).events) == 2
    (d / capture_log.LOG).write_bytes(good + b'{"index":3,"ki')
    assert len(capture_log.read(d).events) == 3
    with capture_log.locked(d):
        assert capture_log.length(d) == 3
    assert (d / capture_log.LOG).read_bytes() == good


def test_a_version_1_log_cut_short_inside_a_line_is_refused(tmp_path: Path) -> None:
    """Version 1 counts each whole line alone: a torn one is refused (a writer may be inside
    its write), naming the event."""
    d = tmp_path / "cap"
    version_1(d, [Messages(0, ())])
    torn = (d / capture_log.LOG).read_bytes()[:-5]
    assert damaged(d, torn).rule is Rule.TRUNCATED


def test_the_events_of_an_append_count_together_or_not_at_all(tmp_path: Path) -> None:
    """Whole lines after the last ``end`` are an append under way or cut short by a kill: no
    part of the log for a reader, and cut off by the next writer."""
    d = written(tmp_path)
    whole = (d / capture_log.LOG).read_bytes()
    assert [b'"end":true' in line for line in whole.splitlines()[1:]] == [False, True, True]
    unfinished = [Progress(((2, 1), (1, -1))), Messages(2, ())]
    lines = [capture_log._line(capture_log.event_json(3 + i, e)) for i, e in enumerate(unfinished)]
    with (d / capture_log.LOG).open("ab") as fh:
        fh.write(b"".join(lines))
    assert len(capture_log.read(d).events) == 3
    with capture_log.locked(d):
        assert capture_log.length(d) == 3
    assert (d / capture_log.LOG).read_bytes() == whole
    with capture_log.locked(d):
        capture_log.append(d, 3, unfinished)
    assert len(capture_log.read(d).events) == 5


def version_1(d: Path, events: list[Messages | Progress]) -> dict[str, object]:
    """A log of version 1 in ``d`` (before appends were marked), holding ``events``; its
    header."""
    header = dict(capture_log.new_header("bank", "balances").as_json(), version=1)
    body = [capture_log.event_json(i, e) for i, e in enumerate(events)]
    (d / capture_log.DATA).mkdir(parents=True)
    (d / capture_log.LOG).write_bytes(b"".join(capture_log._line(o) for o in [header, *body]))
    return header


def test_a_version_1_log_counts_every_whole_line_until_a_writer_makes_it_version_2(
    tmp_path: Path,
) -> None:
    """Written before appends were marked: every whole line is an event; the next writer makes
    it version 2 before it appends, and its appends then count whole or not at all."""
    d = tmp_path / "cap"
    header = version_1(d, [Messages(0, ()), Progress(())])
    assert capture_log.read(d).header.version == 1
    assert len(capture_log.read(d).events) == 2
    with capture_log.locked(d):
        assert capture_log.length(d) == 2  # made version 2, its last line marked end
        capture_log.append(d, 2, [Messages(0, ()), Progress(((1, 1), (0, -1)))])
    log = capture_log.read(d)
    assert (log.header.version, len(log.events)) == (2, 4)
    assert log.header.stream == header["stream"]
    with (d / capture_log.LOG).open("ab") as fh:  # an append cut short after that
        fh.write(capture_log._line(capture_log.event_json(4, Messages(1, ()))))
    assert len(capture_log.read(d).events) == 4
    with capture_log.locked(d):
        assert capture_log.length(d) == 4


def test_a_log_read_again_checks_what_was_appended_and_any_change_before_it(
    tmp_path: Path,
) -> None:
    d = written(tmp_path)
    assert capture_log.read(d).frontiers == (0, 0, 1, 1)
    with capture_log.locked(d):
        capture_log.append(d, 3, [Progress(((2, 1), (1, -1)))])
    log = capture_log.read(d)  # the checked prefix is kept; the new line is checked after it
    assert len(log.events) == 4
    assert log.frontiers == (0, 0, 1, 1, 2)
    good = (d / capture_log.LOG).read_bytes()

    with capture_log.locked(d):  # an event that breaks the protocol after the checked prefix
        capture_log.append(d, 4, [Messages(1, ())])
    for _ in range(2):  # refused, and refused again: a refusal leaves nothing checked behind
        with pytest.raises(StreamError) as err:
            capture_log.read(d)
        assert (err.value.rule, err.value.index) == (Rule.MESSAGE_WITHOUT_CAPABILITY, 4)

    i = good.index(b'"time":0')  # a flipped byte inside the prefix read before, same size
    flipped = good[: i + 7] + b"1" + good[i + 8 :]
    err = damaged(d, flipped)
    assert (err.rule, err.index) == (Rule.CORRUPT, 0)
    (d / capture_log.LOG).write_bytes(good)
    assert len(capture_log.read(d).events) == 4
