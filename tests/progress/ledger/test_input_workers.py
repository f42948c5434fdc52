"""Input workers in the ledger: one rule for moving back and closing twice, a send committed
at the epoch its data was checked for, and corrections that replace one worker's messages."""

from __future__ import annotations

import pytest

from progress import (
    ClosedHandleError,
    EpochNotReachedError,
    InvalidInputTimeError,
    NothingToCorrectError,
    TimeRegressionError,
    WorkerMovedError,
)
from progress.ledger import Ledger, MessageEntry, MessageRef, Origin, RunKind
from tests.progress.ledger.scenario import run_epoch

pytestmark = pytest.mark.ledger

CARDS = "card_payments"


def batches(ledger: Ledger) -> int:
    return ledger.verify().batches


def test_advancing_to_where_a_worker_is_does_nothing_and_below_it_raises(ledger: Ledger) -> None:
    first = ledger.advance("bank", CARDS, 0, 3, seal=True)
    ledger.advance("bank", CARDS, 0, 5, seal=True)
    again = ledger.advance("bank", CARDS, 0, 5, seal=True)  # a retry
    assert again.repeated
    assert not first.repeated
    before = batches(ledger)
    for earlier in (3, 4):  # once reached, or passed over: one rule
        with pytest.raises(TimeRegressionError) as err:
            ledger.advance("bank", CARDS, 0, earlier, seal=True)
        e = err.value
        assert (e.pipeline, e.source, e.worker, e.current, e.requested) == (
            "bank",
            CARDS,
            0,
            5,
            earlier,
        )
        assert str(e).startswith(
            f"pipeline 'bank', source '{CARDS}', worker 0, at epoch 5: cannot advance to epoch "
            f"{earlier}; "
        )
    for bad in ("3", -1):
        with pytest.raises(InvalidInputTimeError) as invalid:
            ledger.advance("bank", CARDS, 0, bad, seal=True)  # type: ignore[arg-type]
        assert (invalid.value.pipeline, invalid.value.source, invalid.value.worker) == (
            "bank",
            CARDS,
            0,
        )
        assert f"worker 0, at epoch 5: {bad!r} is not an epoch" in str(invalid.value)
    assert batches(ledger) == before  # nothing was committed
    assert ledger.worker_time("bank", CARDS, 0) == 5


def test_closing_twice_does_nothing_and_acting_after_close_raises(ledger: Ledger) -> None:
    ledger.advance("bank", CARDS, 1, 4)
    first = ledger.close("bank", CARDS, 1)
    second = ledger.close("bank", CARDS, 1)
    assert (second.batch_id, second.repeated) == (first.batch_id, True)
    before = batches(ledger)
    for epoch in (4, 6):  # the advance it once made, or a new one
        with pytest.raises(ClosedHandleError) as err:
            ledger.advance("bank", CARDS, 1, epoch)
        assert (err.value.pipeline, err.value.worker, err.value.requested) == ("bank", 1, epoch)
        assert f"cannot advance to epoch {epoch} after close()" in str(err.value)
    with pytest.raises(ClosedHandleError, match="cannot send after close"):
        ledger.send("bank", CARDS, 1, MessageEntry(CARDS, 0, 4, "late"))
    assert batches(ledger) == before
    assert ledger.worker_time("bank", CARDS, 1) is None


def test_a_send_commits_at_the_epoch_its_data_was_checked_for(ledger: Ledger) -> None:
    ledger.send("bank", CARDS, 2, MessageEntry(CARDS, 0, 0, "checked-at-0"))
    Ledger(ledger.path).advance("bank", CARDS, 2, 2, seal=True)  # another process moves it
    before = batches(ledger)
    with pytest.raises(WorkerMovedError) as err:
        ledger.send("bank", CARDS, 2, MessageEntry(CARDS, 0, 0, "also-checked-at-0"))
    e = err.value
    assert (e.pipeline, e.source, e.worker, e.checked, e.current) == ("bank", CARDS, 2, 0, 2)
    assert str(e) == (
        f"pipeline 'bank', source '{CARDS}', worker 2: the data was checked for epoch 0, but "
        "the worker is at epoch 2 now (another process moved it); nothing was committed"
    )
    assert batches(ledger) == before
    assert [m.attempt for m in ledger.message("bank", CARDS, 0, 0)] == ["checked-at-0"]
    assert ledger.message("bank", CARDS, 0, 2) == []
    # A retry of the send that committed is still a repeat, wherever the worker is now.
    retry = ledger.send("bank", CARDS, 2, MessageEntry(CARDS, 0, 0, "checked-at-0"))
    assert retry.repeated


def test_every_process_finds_a_worker_where_its_sends_advances_and_close_left_it(
    ledger: Ledger,
) -> None:
    def seen() -> object:  # by another ledger, which reads the worker's row, not this cache
        ledger.release()
        return Ledger(ledger.path).worker_time("bank", CARDS, 1)

    ledger.send("bank", CARDS, 1, MessageEntry(CARDS, 0, 0, "m0"))  # moves nothing
    assert seen() == 0
    ledger.advance("bank", CARDS, 1, 2)
    ledger.send("bank", CARDS, 1, MessageEntry(CARDS, 0, 2, "m2"))
    assert seen() == 2
    ledger.close("bank", CARDS, 1)
    assert seen() is None


def test_a_correction_replaces_only_that_workers_messages_and_moves_nothing(
    ledger: Ledger,
) -> None:
    run_epoch(ledger, 0)
    ledger.send("bank", CARDS, 0, MessageEntry(CARDS, 0, 1, "m1.0"))
    ledger.send("bank", CARDS, 0, MessageEntry(CARDS, 0, 1, "m1.0b"))  # two messages
    ledger.advance("bank", CARDS, 0, 3, seal=True)  # epoch 2 sealed empty
    reads = tuple(MessageRef(CARDS, 0, 0, f"m0.{w}") for w in range(3))
    ledger.commit(  # validate's run at epoch 0 read every worker's message (its lineage)
        "bank",
        [],
        key="revise:validate:0:r",
        origin=Origin.stage("validate", 0, RunKind.REVISION),
        messages=[MessageEntry("validate", 0, 0, "r", replaces=True, run_time=0, reads=reads)],
    )
    before = ledger.tracker("bank").pointstamps()
    assert ledger.stale("bank") == []

    fix = ledger.correct("bank", CARDS, 1, MessageEntry(CARDS, 0, 0, "fix0.1", "/f", 7, 70))
    assert not fix.repeated
    assert [m.attempt for m in ledger.message("bank", CARDS, 0, 0)] == ["m0.0", "m0.2", "fix0.1"]
    assert ledger.stale("bank") == [("validate", 0)]  # it read m0.1, which is replaced
    ledger.correct("bank", CARDS, 0, MessageEntry(CARDS, 0, 1, "fix1.0"))
    assert [m.attempt for m in ledger.message("bank", CARDS, 0, 1)] == ["fix1.0"]
    ledger.correct("bank", CARDS, 0, MessageEntry(CARDS, 0, 2, "fix2.0"))  # a sealed epoch
    assert [m.attempt for m in ledger.message("bank", CARDS, 0, 2)] == ["fix2.0"]
    again = ledger.correct("bank", CARDS, 1, MessageEntry(CARDS, 0, 0, "fix0.1b"))
    assert [m.attempt for m in ledger.message("bank", CARDS, 0, 0)] == ["m0.0", "m0.2", "fix0.1b"]
    assert ledger.correct("bank", CARDS, 1, MessageEntry(CARDS, 0, 0, "fix0.1b")) == (
        type(again)(again.batch_id, again.key, repeated=True)
    )
    assert ledger.tracker("bank").pointstamps() == before  # no count, no frontier moved
    history = ledger.history("bank", CARDS, 0)
    assert [(b.origin, b.worker) for b in history.batches if b.origin == "correction"] == [
        ("correction", 1),
        ("correction", 1),
    ]
    assert ledger.verify().ok

    with pytest.raises(EpochNotReachedError) as err:  # worker 0 is at 3
        ledger.correct("bank", CARDS, 0, MessageEntry(CARDS, 0, 4, "too-early"))
    e = err.value
    assert (e.pipeline, e.source, e.worker, e.current, e.requested) == ("bank", CARDS, 0, 3, 4)
    assert "send() data for the epoch it is at" in str(e)
    assert ledger.message("bank", CARDS, 0, 4) == []
    ledger.close("bank", CARDS, 2)
    ledger.correct("bank", CARDS, 2, MessageEntry(CARDS, 0, 0, "fix0.2"))  # closed: any epoch
    assert [m.attempt for m in ledger.message("bank", CARDS, 0, 0)] == [
        "m0.0",
        "fix0.1b",
        "fix0.2",
    ]


def test_a_correction_where_the_worker_sent_nothing_is_refused(ledger: Ledger) -> None:
    """No output read data from the worker there, so none would be re-run: the correction
    would reach nothing. At the epoch a worker is at, its data is read once it passes it."""
    run_epoch(ledger, 0)  # every worker sent at 0 and is at 1
    ledger.close("bank", CARDS, 1)  # at 1: it sends nothing at 1 or later
    ledger.send("bank", CARDS, 0, MessageEntry(CARDS, 0, 1, "m1.0"))
    ledger.advance("bank", CARDS, 0, 4)  # passes 2 and 3 unsealed
    before = batches(ledger)
    for worker, epoch, current in ((1, 1, None), (1, 7, None), (0, 2, 4)):
        with pytest.raises(NothingToCorrectError) as err:
            ledger.correct("bank", CARDS, worker, MessageEntry(CARDS, 0, epoch, f"f{epoch}"))
        e = err.value
        assert (e.pipeline, e.source, e.worker, e.current, e.requested) == (
            "bank",
            CARDS,
            worker,
            current,
            epoch,
        )
    assert str(e) == (
        f"pipeline 'bank', source '{CARDS}', worker 0, at epoch 4: cannot correct epoch 2, "
        "where it sent nothing (it passed it without sending): a correction replaces what the "
        "worker sent, and adding data at an epoch where it sent none is not supported yet; "
        "nothing was committed"
    )
    assert batches(ledger) == before
    assert [m.attempt for m in ledger.message("bank", CARDS, 0, 1)] == ["m1.0"]
    assert ledger.message("bank", CARDS, 0, 2) == []

    ledger.correct("bank", CARDS, 1, MessageEntry(CARDS, 0, 0, "fix0.1"))  # closed, it sent
    ledger.correct("bank", CARDS, 0, MessageEntry(CARDS, 0, 4, "fix4.0"))  # where it is
    ledger.correct("bank", CARDS, 2, MessageEntry(CARDS, 0, 1, "fix1.2"))  # where it is
    assert [m.attempt for m in ledger.message("bank", CARDS, 0, 0)] == ["m0.0", "m0.2", "fix0.1"]
    assert ledger.verify().ok


def test_a_seal_after_this_holds_own_moves_asks_no_query_and_another_holders_send_counts(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Within one hold, an advance past the epoch this process moved the worker to seals it or
    not from what this process did there (no query of the sends); a send by another holder
    ends the hold, and the next advance asks the ledger again."""
    from progress.ledger import inputs

    asked: list[tuple[int, int]] = []
    query = inputs.sent_between

    def counted(*args: object, start: int, to: int) -> set[int]:
        asked.append((start, to))
        return query(*args, start=start, to=to)  # type: ignore[arg-type]

    monkeypatch.setattr(inputs, "sent_between", counted)

    def attempts(epoch: int) -> list[str]:
        return sorted(m.attempt for m in ledger.message("bank", CARDS, 0, epoch))

    with ledger.held():
        ledger.advance("bank", CARDS, 0, 1, seal=True)  # from where the hold found it: asked
        assert asked == [(0, 1)]
        ledger.send("bank", CARDS, 0, MessageEntry(CARDS, 0, 1, "sent-at-1"))
        ledger.advance("bank", CARDS, 0, 2, seal=True)  # sent at 1: not sealed, not asked
        ledger.advance("bank", CARDS, 0, 3, seal=True)  # nothing at 2: sealed, not asked
        assert asked == [(0, 1)]
        assert attempts(1) == ["sent-at-1"]
        assert attempts(2) == [f"empty:{CARDS}:0:2"]
        Ledger(ledger.path).send("bank", CARDS, 0, MessageEntry(CARDS, 0, 3, "other-at-3"))
        ledger.advance("bank", CARDS, 0, 4, seal=True)  # another holder sent: asked
        assert asked == [(0, 1), (3, 4)]
        assert attempts(3) == ["other-at-3"]
        ledger.advance("bank", CARDS, 0, 6, seal=True)  # two epochs at once: asked
        assert asked[-1] == (4, 6)
    assert attempts(4) == [f"empty:{CARDS}:0:4"]
    assert attempts(5) == [f"empty:{CARDS}:0:5"]
    assert ledger.verify().ok


def test_a_fresh_send_asks_for_no_earlier_commit_and_its_key_committed_is_refused(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A send of a message made for the call (``fresh``) looks for no earlier commit of its
    key; the same message sent fresh again is refused by the batches' unique key, nothing
    counted twice, and sent as a retry it is the first commit, repeated."""
    import duckdb

    from progress.ledger import inputs

    asked: list[str] = []
    query = inputs.committed

    def counted(s: object, pipeline: str, key: str) -> object:
        asked.append(key)
        return query(s, pipeline, key)  # type: ignore[arg-type]

    monkeypatch.setattr(inputs, "committed", counted)
    message = MessageEntry(CARDS, 0, 0, "made-for-this-send", rows=3)
    first = ledger.send("bank", CARDS, 0, message, fresh=True)
    assert asked == []
    before = batches(ledger)
    with pytest.raises(duckdb.ConstraintException):
        ledger.send("bank", CARDS, 0, message, fresh=True)
    assert batches(ledger) == before
    assert [m.attempt for m in ledger.message("bank", CARDS, 0, 0)] == ["made-for-this-send"]
    retry = ledger.send("bank", CARDS, 0, message)
    assert retry.repeated
    assert retry.batch_id == first.batch_id
    assert asked == [f"send:{CARDS}:0:made-for-this-send"]
    for bad in ({"message": None}, {"key": "mine"}):
        with pytest.raises(ValueError, match="fresh applies to a new message"):
            ledger.send("bank", CARDS, 0, **{"message": message, **bad}, fresh=True)  # type: ignore[arg-type]
    assert ledger.verify().ok


def test_a_send_with_its_advance_is_one_write_and_seals_only_the_epochs_it_did_not_send(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``send(..., advance_to=E)`` writes the send's batch and the advance's in one statement
    each for headers and updates: the epoch sent at is not sealed, the epochs passed over are
    (an advance of several epochs, whose query of the sends cannot see the send written with
    it), the advance keeps its own key (advancing there again is a repeat), and an advance
    that moves back commits neither."""
    from progress.ledger import writer

    writes: list[list[str]] = []
    write = writer.write_batches

    def counted(s: object, pipeline: str, graph: object, pending: list[writer.Pending]) -> object:
        writes.append([p.key for p in pending])
        return write(s, pipeline, graph, pending)  # type: ignore[arg-type]

    monkeypatch.setattr("progress.ledger.inputs.write_batches", counted)
    before = batches(ledger)
    sent = ledger.send("bank", CARDS, 0, MessageEntry(CARDS, 0, 0, "at-0"), advance_to=3)
    assert len(writes) == 1
    assert len(writes[0]) == 2
    assert batches(ledger) == before + 2
    assert not sent.repeated
    assert sent.key == writes[0][0]
    assert ledger.worker_time("bank", CARDS, 0) == 3
    assert [m.attempt for m in ledger.message("bank", CARDS, 0, 0)][-1] == "at-0"
    assert f"empty:{CARDS}:0:0" not in [m.attempt for m in ledger.message("bank", CARDS, 0, 0)]
    for epoch in (1, 2):
        assert f"empty:{CARDS}:0:{epoch}" in [
            m.attempt for m in ledger.message("bank", CARDS, 0, epoch)
        ]
    assert ledger.advance("bank", CARDS, 0, 3, seal=True).repeated
    with pytest.raises(TimeRegressionError):
        ledger.send("bank", CARDS, 0, MessageEntry(CARDS, 0, 3, "at-3"), advance_to=2)
    assert batches(ledger) == before + 2
    assert "at-3" not in [m.attempt for m in ledger.message("bank", CARDS, 0, 3)]
    assert ledger.verify().ok
