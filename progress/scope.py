"""The nested scope of an iterative stage: its name in the ledger and its progress graph."""

from __future__ import annotations

from progress.graph import Graph, GraphBuilder
from progress.location import Source, Target
from progress.summary import Delay, ProductSummary
from progress.timestamp import Product

STEP = "step"
"""The one node inside the scope: a round, whose output is the next round's input."""


def scope_name(pipeline: str, stage: str) -> str:
    """The ledger name of an iterative stage's scope, whose times are ``Product(epoch, round)``.

    >>> scope_name("bank", "rings")
    'bank.rings'
    """
    return f"{pipeline}.{stage}"


def scope_graph() -> Graph:
    """The progress graph inside an iterative stage: a round whose output is the next round's
    input, one round later."""
    builder = GraphBuilder(Product(0, 0))
    builder.add_node(
        STEP,
        inputs=1,
        outputs=1,
        summaries={(0, 0): [ProductSummary(Delay(0), Delay(1))]},
        workers=0,
    )
    builder.add_edge(Source(STEP, 0), Target(STEP, 0))
    return builder.compile()
