"""What a hold of the ledger file remembers (``progress.ledger.hold_cache``) equals what the
ledger says when asked afresh: counts, stale outputs, input workers' capabilities, the keys
committed and the current messages, after
any sequence of sends, advances, stage runs, corrections and revisions, through the holder or
another ``Ledger`` on the file (which takes the file from it: a new hold), with rolled-back
transactions among them."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from progress.ledger import (
    Ledger,
    MessageEntry,
    MessageRef,
    Origin,
    RunKind,
    inputs,
    marks,
    queries,
    writer,
)
from progress.ledger.hold_cache import HoldCache
from progress.ledger.sessions import Session
from tests.progress.ledger.scenario import bank_graph

pytestmark = pytest.mark.ledger

P = "bank"
WORKERS = 3
STAGES = ("validate", "totals")
UPSTREAM = {"validate": "card_payments", "totals": "validate"}


class RolledBackError(Exception):
    """Raised inside a transaction to roll it back."""


@contextmanager
def holder_session(ledger: Ledger) -> Iterator[Session]:
    """The holder's own session (its hold's cache in ``session.cache``)."""
    with ledger._sessions.session() as s:  # the cache is what is under test
        yield s


def remembered(s: Session) -> Session:
    """A session on ``s``'s connection that answers from a copy of its hold's cache: asking it
    leaves what the hold remembers as it was (the graphs shared, as the hold shares them)."""
    graphs = {id(g): g for g in (*s.cache.graphs.values(), *s._known.values())}
    return Session(s.con, s._known, copy.deepcopy(s.cache, graphs))


RUN_KEYS = [f"run:{stage}:{epoch}" for stage in STAGES for epoch in range(8)]
PORTS = ("card_payments", *STAGES)
READERS = ("one reader", "another")


def answers(s: Session) -> tuple[list[Any], ...]:
    """The pipeline's counts, stale outputs, input workers' capabilities, which run keys are
    committed, the current messages of each stage and epoch and each reader's unmarked
    messages of each stage, as ``s`` says."""
    pointstamps = sorted(queries.tracker(s, P).pointstamps(), key=repr)
    workers = [inputs.worker_time(s, P, "card_payments", w) for w in range(WORKERS)]
    keys = [writer.committed(s, P, key) is not None for key in RUN_KEYS]
    messages = [
        queries.message(s, P, stage, 0, epoch)
        for stage in ("card_payments", *STAGES)
        for epoch in range(8)
    ]
    unmarked = [marks.unmarked(s, P, stage, 0, reader) for stage in PORTS for reader in READERS]
    return pointstamps, queries.stale(s, P), workers, keys, messages, unmarked


def run_stage(ledger: Ledger, stage: str, revise: bool) -> None:
    """Run ``stage`` at its first ready epoch (or revise its latest output), reading the
    current messages of its input."""
    tracker = ledger.tracker(P)
    done = ledger.done_epochs(P, stage)
    if revise:
        if not done:
            return
        epoch, batch = done[-1], []
        key = f"revise:{stage}:{len(ledger.history(P, stage, epoch).messages)}"
    else:
        ready = [t for t in range(8) if t not in done and tracker.ready(stage, t)]
        if not ready:
            return
        epoch = ready[0]
        batch, key = tracker.stage_batch(stage, epoch), f"run:{stage}:{epoch}"
    upstream = UPSTREAM[stage]
    reads = tuple(
        MessageRef(upstream, 0, epoch, m.attempt) for m in ledger.message(P, upstream, 0, epoch)
    )
    ledger.commit(
        P,
        batch,
        key=key,
        origin=Origin.stage(stage, epoch, RunKind.REVISION if revise else RunKind.RUN),
        messages=[MessageEntry(stage, 0, epoch, key, replaces=revise, reads=reads)],
    )


def act(ledger: Ledger, step: tuple[str, int]) -> None:
    kind, n = step
    worker = n % WORKERS
    at = ledger.worker_time(P, "card_payments", worker)
    assert at is None or isinstance(at, int)  # the bank graph's times are epochs
    if kind == "send" and at is not None:
        entry = MessageEntry("card_payments", 0, at, f"s{at}.{worker}.{n}")
        ledger.send(P, "card_payments", worker, entry)
    elif kind == "advance" and at is not None:
        ledger.advance(P, "card_payments", worker, at + 1)
    elif kind == "correct" and at is not None and at > 0:
        epoch = n % at  # one it sent at: an epoch it passed without sending has nothing to correct
        if ledger.worker_sent(P, "card_payments", worker, epoch, sealed=True):
            entry = MessageEntry("card_payments", 0, epoch, f"c{n}")
            ledger.correct(P, "card_payments", worker, entry)
    elif kind in ("run", "revise"):
        run_stage(ledger, STAGES[n % 2], revise=kind == "revise")
    elif kind == "compact":
        ledger.compact()
    elif kind == "read":  # several places read ahead in one query
        places = [(PORTS[(n + i) % len(PORTS)], 0, (n // (i + 1)) % 8) for i in range(3)]
        ledger.read_messages(P, places)
    elif kind == "ask":  # every answer read, and remembered by the hold
        with holder_session(ledger) as s:
            answers(s)
    elif kind == "mark":
        stage, reader = PORTS[n % len(PORTS)], READERS[n % len(READERS)]
        current = ledger.messages(P, stage, 0)
        if current:
            ledger.mark(P, stage, 0, reader, through=current[n % len(current)].batch_id)


STEPS = st.lists(
    st.tuples(
        st.sampled_from(
            ["send", "advance", "correct", "run", "revise", "compact", "mark", "read", "ask"]
        ),
        st.integers(0, 50),
        st.sampled_from(["holder", "holder", "other", "rolled back"]),
    ),
    min_size=1,
    max_size=30,
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=STEPS)
def test_what_a_hold_remembers_equals_the_ledger_asked_afresh(
    tmp_path_factory: pytest.TempPathFactory, steps: list[tuple[str, int, str]]
) -> None:
    path = tmp_path_factory.mktemp("hold") / "ledger.duckdb"
    holder = Ledger(path, lock_timeout=30, linger=60)  # one hold across its sessions
    other = Ledger(path, lock_timeout=30, linger=0)
    holder.register(P, bank_graph())
    for worker in range(WORKERS):  # epoch 0 in, and validated: a correction makes it stale
        act(holder, ("send", worker))
        act(holder, ("advance", worker))
    act(holder, ("run", 0))
    try:
        for kind, n, by in steps:
            if by == "other":
                act(other, (kind, n))  # the holder lets the file go: its next session is a new hold
            elif by == "rolled back":  # inside a session that goes on: the same hold
                with holder.session():
                    with pytest.raises(RolledBackError):
                        roll_back(holder, (kind, n))
                    with holder_session(holder) as s:
                        afresh = Session(s.con, {}, HoldCache(-1))
                        assert answers(remembered(s)) == answers(afresh), (kind, n, by)
            else:
                act(holder, (kind, n))
            with holder_session(holder) as s:
                afresh = Session(s.con, {}, HoldCache(-1))
                assert answers(remembered(s)) == answers(afresh), (kind, n, by)
    finally:
        holder.release()


def roll_back(ledger: Ledger, step: tuple[str, int]) -> None:
    """``step`` in a transaction that is rolled back after the ledger's answers were read in
    it (so the hold remembered what the transaction wrote)."""
    with ledger.atomic():
        act(ledger, step)
        with holder_session(ledger) as s:
            answers(s)
        raise RolledBackError


def test_within_one_hold_the_counts_are_read_once_and_commits_keep_them(tmp_path: Path) -> None:
    """In one hold, a tracker after a commit costs no query: the commit added its batch to the
    counts remembered, and they equal the ledger's."""
    ledger = Ledger(tmp_path / "ledger.duckdb", lock_timeout=30, linger=60)
    ledger.register(P, bank_graph())
    try:
        with ledger.session():
            ledger.tracker(P)
            with holder_session(ledger) as s:
                hold = s.cache.hold
                graph = s.graph(P)
                assert s.cache.counts(P, graph) is not None
                assert s.cache.replaced.get(P) is None
            ledger.send(P, "card_payments", 0, MessageEntry("card_payments", 0, 0, "m0"))
            ledger.advance(P, "card_payments", 0, 1)
            assert ledger.stale(P) == []
        with holder_session(ledger) as s:
            assert s.cache.hold == hold  # the ledger lingered: the same hold
            remembered = sorted(s.cache.counts(P, graph) or [])
            afresh = Session(s.con, {}, HoldCache(-1))
            assert sorted(queries.tracker(afresh, P).pointstamps(), key=repr) == sorted(
                queries.tracker(s, P).pointstamps(), key=repr
            )
            assert remembered
            assert s.cache.replaced.get(P) is False
        ledger.correct(P, "card_payments", 0, MessageEntry("card_payments", 0, 0, "m0b"))
        with holder_session(ledger) as s:
            assert s.cache.replaced.get(P) is True
    finally:
        ledger.release()


def test_a_commit_under_a_key_this_hold_found_free_asks_no_query_and_another_holder_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run admitted in a hold (``Ledger.uncommitted``: it was pending in the counts) commits
    with no query of its key while the hold lasts, and once; a commit under it by another
    holder ends the hold, and the holder's commit then finds it (``repeated``)."""
    asked: list[str] = []
    query = writer.committed

    def counted(s: Session, pipeline: str, key: str) -> Any:
        if (pipeline, key) not in s.cache.uncommitted:
            asked.append(key)
        return query(s, pipeline, key)

    monkeypatch.setattr(writer, "committed", counted)
    holder = Ledger(tmp_path / "ledger.duckdb", lock_timeout=30, linger=60)
    holder.register(P, bank_graph())
    for worker in range(WORKERS):
        act(holder, ("send", worker))
        act(holder, ("advance", worker))

    def commit(ledger: Ledger, key: str) -> bool:
        batch = ledger.tracker(P).stage_batch("validate", 0)
        origin = Origin.stage("validate", 0)
        return ledger.commit(P, batch, key=key, origin=origin).repeated

    try:
        with holder.session():
            holder.uncommitted(P, "run:validate:0")
        assert not commit(holder, "run:validate:0")
        assert asked == []  # the same hold: no query
        assert commit(holder, "run:validate:0")  # committed now: asked, and found
        assert asked == ["run:validate:0"]
        with holder.session():
            holder.uncommitted(P, "run:other:0")
        Ledger(tmp_path / "ledger.duckdb", lock_timeout=30).commit(P, [], key="run:other:0")
        assert commit(holder, "run:other:0")  # a new hold: asked again, and found
        assert asked == ["run:validate:0", "run:other:0", "run:other:0"]  # the other's, ours
        assert holder.verify().ok
    finally:
        holder.release()


def test_messages_read_ahead_cost_one_query_and_equal_those_asked_one_by_one(
    tmp_path: Path,
) -> None:
    """``read_messages`` reads the places this hold has not read in one query; ``message``
    then answers each from the hold, the same as a ledger asked afresh."""
    path = tmp_path / "ledger.duckdb"
    holder = Ledger(path, lock_timeout=30, linger=60)
    holder.register(P, bank_graph())
    for step in [("send", 0), ("send", 1), ("advance", 0), ("send", 3)]:
        act(holder, step)
    places = [("card_payments", 0, 0), ("card_payments", 0, 1), ("validate", 0, 0)]
    try:
        with holder_session(holder) as s:
            asked: list[str] = []
            con = s.con

            class Counting:
                def execute(self, sql: str, *args: Any) -> Any:
                    asked.append(sql)
                    return con.execute(sql, *args)

            counting = Session(Counting(), s._known, s.cache)
            queries.read_messages(counting, P, places)
            assert len(asked) == 1
            got = [queries.message(counting, P, *place) for place in places]
            assert len(asked) == 1
            afresh = Session(con, {}, HoldCache(-1))
            assert got == [queries.message(afresh, P, *place) for place in places]
            assert [len(m) for m in got] == [2, 1, 0]
    finally:
        holder.release()


def test_a_place_past_the_newest_epoch_read_costs_no_query_until_a_worker_corrects_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once a hold has read the newest epoch of each port, the messages of a later epoch are
    those the holder sent there: asked with no query. A worker's correction there replaces its
    own message only, so the place is read again, and holds the other worker's message too."""
    holder = Ledger(tmp_path / "ledger.duckdb", lock_timeout=30, linger=60)
    holder.register(P, bank_graph())
    for step in [("send", 0), ("send", 1), ("advance", 0), ("advance", 1)]:
        act(holder, step)
    asked: list[str] = []
    rows = Session.rows

    def counted(s: Session, sql: str, params: Any = ()) -> Any:
        if "FROM messages" in sql:  # the reads of messages
            asked.append(sql)
        return rows(s, sql, params)

    monkeypatch.setattr(Session, "rows", counted)
    try:
        assert len(holder.message(P, "card_payments", 0, 0)) == 2  # one query
        assert holder.message(P, "validate", 0, 0) == []  # the newest epochs read, no more
        assert len(asked) == 2
        assert "max(t0)" in asked[1]
        for step in [("send", 0), ("send", 1), ("advance", 0), ("advance", 1)]:
            act(holder, step)  # epoch 1, past the newest epoch read
        before = len(asked)
        assert [m.attempt for m in holder.message(P, "card_payments", 0, 1)] == ["s1.0.0", "s1.1.1"]
        assert len(asked) == before  # no query
        holder.correct(P, "card_payments", 0, MessageEntry("card_payments", 0, 1, "c1"))
        before = len(asked)
        got = holder.message(P, "card_payments", 0, 1)
        assert len(asked) == before + 1  # read again
        assert [m.attempt for m in got] == ["s1.1.1", "c1"]
        with holder_session(holder) as s:
            assert got == queries.message(
                Session(s.con, {}, HoldCache(-1)), P, "card_payments", 0, 1
            )
    finally:
        holder.release()
