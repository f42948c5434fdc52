"""``epochgate replay``: feed and run from the shell, follow captures until they are done, and
``--diff`` a pipeline's outputs against captured ones (a planted change is reported, unchanged
code reports nothing)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import duckdb
import pytest
from pyspark.sql import SparkSession

from pipelines.capture import log as capture_log
from pipelines.cli.main import main
from pipelines.run.runtime import Runtime
from progress.capture import Messages
from progress.ledger import Ledger
from tests.fixtures.handmade_captures import Capture, advance, done, epochs, stream_rows
from tests.fixtures.replayed import CAPTURES_ENV, PLANTED_ENV, REF
from tests.waiting import wait_until

pytestmark = pytest.mark.spark


def captured_totals(inputs: list[Path], out: Path) -> Path:
    """A capture of stage ``totals`` as it should be: per epoch, DuckDB's per-account sums of
    the captured inputs."""
    c = Capture(out, stage="totals")
    by_epoch: dict[int, list[str]] = {}
    for d in inputs:
        for e in capture_log.read(d).events:
            if isinstance(e, Messages):
                by_epoch.setdefault(e.time, []).extend(str(d / f.path) for f in e.files)
    for epoch in sorted(by_epoch):
        rows = duckdb.sql(
            f"SELECT account, sum(amount)::BIGINT FROM read_parquet({by_epoch[epoch]!r}) "
            "GROUP BY account"
        ).fetchall()
        c.add(c.messages(epoch, [(a, int(n)) for a, n in rows]), advance(epoch, epoch + 1))
    c.add(done(max(by_epoch) + 1))
    return out


def replay(home: Path, *argv: str) -> int:
    return main(
        [
            "replay",
            "-p",
            REF,
            "--ledger",
            str(home / "ledger.duckdb"),
            "--data",
            str(home / "data"),
            *argv,
        ]
    )


def test_replay_feeds_runs_and_diffs(
    tmp_path: Path,
    spark: SparkSession,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    inputs = [tmp_path / f"s{i}" for i in range(2)]
    for i, d in enumerate(inputs):
        epochs(Capture(d), stream_rows(i))
    expected = captured_totals(inputs, tmp_path / "totals")
    monkeypatch.setenv(CAPTURES_ENV, os.pathsep.join(map(str, inputs)))

    code = replay(tmp_path / "same", "--diff", "--captured-outputs", str(expected))
    out = capsys.readouterr().out
    assert code == 0, out
    assert "fed 14 event(s); 3 stage run(s)" in out
    assert "no difference in 3 captured (stage, epoch) output(s)" in out

    monkeypatch.setenv(PLANTED_ENV, "1")
    code = replay(tmp_path / "planted", "--diff", "--captured-outputs", str(expected))
    out = capsys.readouterr().out
    assert code == 1
    a1 = {
        e
        for e, rows in ((e, stream_rows(0)[e] + stream_rows(1)[e]) for e in range(3))
        if any(a == "a1" for a, _ in rows)
    }
    lines = [line.split() for line in out.splitlines() if line.startswith("totals ")]
    assert [(int(e), int(p), int(c)) for _, e, p, c in lines] == [(e, 1, 1) for e in sorted(a1)]
    assert f"{len(a1)} of 3 captured (stage, epoch) output(s) differ" in out


def test_follow_tails_a_capture_until_every_stream_is_done(
    tmp_path: Path,
    spark: SparkSession,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    a, b = Capture(tmp_path / "a"), Capture(tmp_path / "b")
    epochs(a, stream_rows(0))
    epochs(b, stream_rows(1), until=1)  # b holds epoch 1
    monkeypatch.setenv(CAPTURES_ENV, os.pathsep.join([str(a.directory), str(b.directory)]))
    home = tmp_path / "home"
    assert replay(home) == 0  # without --follow: what is there now, then it ends
    assert "1 stage run(s)" in capsys.readouterr().out

    codes: list[int] = []
    follow = threading.Thread(
        target=lambda: codes.append(replay(home, "--follow", "--poll", "0.2")), daemon=True
    )
    follow.start()  # the upstream writes on while the command follows
    ledger = Ledger(home / "ledger.duckdb")
    rows = stream_rows(1)
    b.add(b.messages(1, rows[1]), advance(1, 2))
    wait_until(
        lambda: ledger.done_epochs("replayed", "totals") == [0, 1],
        120,
        "the follower's run of epoch 1",
        every=0.2,  # the follower's own poll: each look takes the ledger's lock from it
    )
    assert follow.is_alive()
    b.add(b.messages(2, rows[2]), advance(2, 3), done(3))
    follow.join(timeout=120)
    assert codes == [0]  # every stream done and nothing left to run: it ended by itself
    assert ledger.done_epochs("replayed", "totals") == [0, 1, 2]
    out = capsys.readouterr().out
    assert "fed 2 event(s); 1 stage run(s)" in out
    assert "fed 3 event(s); 1 stage run(s)" in out


def test_a_step_counts_what_it_fed_and_leaves_later_events_to_the_next(
    tmp_path: Path,
    spark: SparkSession,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Events written between a step's feed and its runs are fed, and counted, by the next
    step: its runs do not feed them unseen."""
    a, b = Capture(tmp_path / "a"), Capture(tmp_path / "b")
    epochs(a, stream_rows(0))
    epochs(b, stream_rows(1), until=1)
    monkeypatch.setenv(CAPTURES_ENV, os.pathsep.join([str(a.directory), str(b.directory)]))
    feed = Runtime.replay
    calls: list[int] = []

    def racing(rt: Runtime) -> int:
        fed = feed(rt)
        calls.append(fed)
        if len(calls) == 1:  # the upstream writes the rest just after the first feed
            rows = stream_rows(1)
            b.add(b.messages(1, rows[1]), advance(1, 2), b.messages(2, rows[2]))
            b.add(advance(2, 3), done(3))
        return fed

    monkeypatch.setattr(Runtime, "replay", racing)
    assert replay(tmp_path / "home", "--follow", "--poll", "0.05") == 0
    out = capsys.readouterr().out
    assert calls[:2] == [9, 5]
    assert "fed 9 event(s); 1 stage run(s)" in out
    assert "fed 5 event(s); 2 stage run(s)" in out
