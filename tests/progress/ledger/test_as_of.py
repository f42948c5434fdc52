"""A dimension source's content as of an epoch (``Ledger.messages_as_of``), against a model.

The model is the rule in plain Python over the messages each worker sent (with rows or an empty
frame): per worker, those at the latest epoch ``<=`` the one asked where it sent any; epochs it
sealed empty leave its table as it was; the content is every worker's.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from progress import Graph, GraphBuilder, Product, Source, Target
from progress.errors import InvalidTimeError
from progress.ledger import Ledger, MessageEntry

pytestmark = pytest.mark.ledger

WORKERS = 2
EPOCHS = 6

# What a worker does at an epoch: nothing (sealed empty when it advances past it), a message
# with rows, a sent empty frame, or two messages with rows.
NOTHING, ROWS, EMPTY_FRAME, TWICE = "nothing", "rows", "empty frame", "twice"
Step = str

steps = st.sampled_from([NOTHING, NOTHING, ROWS, EMPTY_FRAME, TWICE])
worker_plans = st.tuples(
    st.lists(steps, min_size=EPOCHS, max_size=EPOCHS),
    st.one_of(st.none(), st.integers(0, EPOCHS - 1)),  # the epoch after which it closes
)


@dataclass(frozen=True)
class Sent:
    worker: int
    epoch: int
    attempt: str


def graph() -> Graph:
    b = GraphBuilder()
    b.add_node("accounts", inputs=0, outputs=1, workers=WORKERS)
    b.add_node("enriched", inputs=1, outputs=1, workers=0)
    b.add_edge(Source("accounts"), Target("enriched"))
    return b.compile()


def play(ledger: Ledger, plans: list[tuple[list[Step], int | None]]) -> list[Sent]:
    """Each worker's plan, epoch by epoch (the workers interleaved), sealing as it advances."""
    sent: list[Sent] = []
    closed: set[int] = set()
    for epoch in range(EPOCHS):
        for worker, (plan, close_after) in enumerate(plans):
            if worker in closed:
                continue
            step = plan[epoch]
            count = {NOTHING: 0, ROWS: 1, EMPTY_FRAME: 1, TWICE: 2}[step]
            for i in range(count):
                attempt = f"w{worker}e{epoch}m{i}"
                rows = 0 if step == EMPTY_FRAME else 3
                entry = MessageEntry("accounts", 0, epoch, attempt, f"/data/{attempt}", rows, 1)
                ledger.send("dims", "accounts", worker, entry)
                sent.append(Sent(worker, epoch, attempt))
            if close_after == epoch:
                ledger.close("dims", "accounts", worker)
                closed.add(worker)
            else:
                ledger.advance("dims", "accounts", worker, epoch + 1, seal=True)
    return sent


def model(sent: list[Sent], epoch: int) -> set[str]:
    out: set[str] = set()
    for worker in range(WORKERS):
        mine = [s for s in sent if s.worker == worker and s.epoch <= epoch]
        if mine:
            latest = max(s.epoch for s in mine)
            out |= {s.attempt for s in mine if s.epoch == latest}
    return out


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(worker_plans, min_size=WORKERS, max_size=WORKERS))
def test_the_content_as_of_an_epoch_is_each_workers_latest_data(
    plans: list[tuple[list[Step], int | None]],
) -> None:
    with tempfile.TemporaryDirectory() as home:
        ledger = Ledger(Path(home) / "ledger.duckdb")
        try:
            ledger.register("dims", graph())
            sent = play(ledger, plans)
            for epoch in range(EPOCHS + 2):
                found = ledger.messages_as_of("dims", "accounts", 0, epoch)
                assert {m.attempt for m in found} == model(sent, epoch), epoch
                assert all(m.path is not None and m.current for m in found)
                assert [m.batch_id for m in found] == sorted(m.batch_id for m in found)
        finally:
            ledger.release()  # a lingering ledger lets its files go before they are removed


def test_sealed_epochs_keep_the_table_and_an_empty_frame_clears_it(ledger: Ledger) -> None:
    """One worker of ``bank``'s ``card_payments``, read as a table."""

    def send(attempt: str, rows: int) -> None:
        at = ledger.worker_time("bank", "card_payments", 0)  # a send is at the worker's epoch
        assert at is not None
        entry = MessageEntry("card_payments", 0, at, attempt, f"/data/{attempt}", rows, 1)
        ledger.send("bank", "card_payments", 0, entry)

    def as_of(epoch: int) -> list[tuple[int, str]]:
        found = ledger.messages_as_of("bank", "card_payments", 0, epoch)
        return [(m.time, m.attempt) for m in found]  # type: ignore[misc]

    assert as_of(5) == []
    send("first", 4)
    ledger.advance("bank", "card_payments", 0, 3, seal=True)  # 1 and 2 sealed empty
    send("emptied", 0)
    ledger.advance("bank", "card_payments", 0, 5, seal=True)
    send("again", 2)
    ledger.close("bank", "card_payments", 0)
    assert [as_of(e) for e in (0, 2, 3, 4, 5, 99)] == [
        [(0, "first")],
        [(0, "first")],
        [(3, "emptied")],
        [(3, "emptied")],
        [(5, "again")],
        [(5, "again")],
    ]
    with pytest.raises(InvalidTimeError, match="kept by epoch"):
        ledger.messages_as_of("bank", "card_payments", 0, Product(3, 1))
