"""Following a stage epoch by epoch (``Runtime.subscribe``): each epoch once it is final, in
epoch order, and again, marked as a revision, when a revision replaces its output.

The subscription asks the ledger every ``poll`` seconds, so the progress it follows may come
from any process: the command line, a Dagster run, another runtime. An epoch is never given
before it is final (``pipelines.reads.final``). The subscription ends once the frontier at the
stage's output is empty (every input worker above it has closed), every epoch up to its last
message has been given and no re-run above it is pending; or after ``timeout`` seconds in which
nothing new was given.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pipelines.reads.final import Finality

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


@dataclass(frozen=True)
class Completed:
    """One epoch of a stage's output, final."""

    epoch: int
    frame: DataFrame
    revision: bool
    """True when the epoch was given before and a revision has replaced its output since."""


def follow(
    finality: Finality,
    stage: str,
    read: Callable[[int], DataFrame],
    *,
    from_epoch: int = 0,
    poll: float = 1.0,
    timeout: float | None = None,
) -> Iterator[Completed]:
    """The ``Completed`` epochs of ``stage`` from ``from_epoch`` on (see the module docs);
    ``read`` gives an epoch's output."""
    given: dict[int, frozenset[str]] = {}  # epoch -> the attempts its output was read from
    upcoming = from_epoch
    last_given = time.monotonic()
    while True:
        closed = finality.closed(stage)
        versions = _versions(finality, stage)
        last = max((e for e in versions if e >= from_epoch), default=from_epoch - 1)
        for epoch in sorted(given):
            changed = versions.get(epoch, frozenset()) != given[epoch]
            if changed and not finality.holds(stage, epoch):
                # final again: what it is read from is what the ledger holds from now on
                given[epoch] = _versions(finality, stage).get(epoch, frozenset())
                last_given = time.monotonic()
                yield Completed(epoch, read(epoch), revision=True)
        while not (closed and upcoming > last) and not finality.holds(stage, upcoming):
            if upcoming > last and finality.closed(stage):
                break  # closed since it was asked: past the last message there is no epoch
            given[upcoming] = _versions(finality, stage).get(upcoming, frozenset())
            last_given = time.monotonic()
            yield Completed(upcoming, read(upcoming), revision=False)
            upcoming += 1
        if closed and upcoming > last and not finality.stale_above(stage):
            return
        if timeout is not None and time.monotonic() - last_given >= timeout:
            return
        time.sleep(poll)


def _versions(finality: Finality, stage: str) -> dict[int, frozenset[str]]:
    """Per epoch of ``stage``'s output, the attempts of its current messages there."""
    found: dict[int, set[str]] = {}
    for message in finality.ledger.messages(finality.pipeline, stage, 0):
        if isinstance(message.time, int):
            found.setdefault(message.time, set()).add(message.attempt)
    return {epoch: frozenset(attempts) for epoch, attempts in found.items()}
