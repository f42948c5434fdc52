"""A small bank-like pipeline for ledger tests: its graph, and one epoch driven through it."""

from __future__ import annotations

from progress import Delay, Graph, GraphBuilder, Source, Target
from progress.ledger import Ledger, MessageEntry, Origin, RunKind


def bank_graph(extra_stage: bool = False) -> Graph:
    b = GraphBuilder()
    b.add_node("card_payments", inputs=0, outputs=1, workers=3)
    b.add_node("validate", inputs=1, outputs=1, workers=0)
    b.add_node("totals", inputs=1, outputs=1, workers=0, summaries={(0, 0): [Delay(0)]})
    b.add_edge(Source("card_payments"), Target("validate"))
    b.add_edge(Source("validate"), Target("totals"))
    if extra_stage:
        b.add_node("audit", inputs=1, outputs=1, workers=0)
        b.add_edge(Source("validate"), Target("audit"))
    return b.compile()


def run_epoch(ledger: Ledger, epoch: int, workers: int = 3) -> None:
    for w in range(workers):
        ledger.send(
            "bank", "card_payments", w, MessageEntry("card_payments", 0, epoch, f"m{epoch}.{w}")
        )
        ledger.advance("bank", "card_payments", w, epoch + 1)
    for stage in ("validate", "totals"):
        tracker = ledger.tracker("bank")
        assert tracker.ready(stage, epoch)
        ledger.commit(
            "bank",
            tracker.stage_batch(stage, epoch),
            key=f"run:{stage}:{epoch}",
            origin=Origin.stage(stage, epoch, RunKind.RUN),
            messages=[MessageEntry(stage, 0, epoch, f"a:{stage}:{epoch}", rows=epoch)],
        )
