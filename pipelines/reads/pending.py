"""Pending upqueries: reads of a partial stage as of an epoch it has not processed yet.

Such a read cannot be answered now. ``Runtime.request`` records it in the ledger, one pending
read per key (a key already pending at that epoch is not recorded twice), after checking the
keys as ``lookup`` does; ``lookup_or_request`` is a lookup that records its keys when the epoch
is not processed yet, and says so in its error. Once the stage has processed the epoch, an
upquery run (``fill``) looks the keys up, which fills their holes, and marks them filled. The
Dagster upquery sensor asks ``status`` which reads can be filled and what holds the others.

A key is stored as the JSON list of its values; a date, timestamp or decimal value as a one-key
object naming its type (``{"date": "2026-11-21"}``), so it reads back as it was given.
"""

from __future__ import annotations

import datetime
import decimal
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pipelines.errors import ReadPendingError, StageNotReadyError, StateReadError
from pipelines.reads.lookup import KeyedReads, Lookup
from pipelines.run.epochs import epoch_problem
from pipelines.stages.kinds import KeyedStage
from progress.ledger import PendingUpquery
from progress.sentences import read_recorded, reads_wait, ready_not_run
from state_store import Key


def _tagged(value: Any) -> Any:
    if isinstance(value, datetime.datetime):
        return {"timestamp": value.isoformat()}
    if isinstance(value, datetime.date):
        return {"date": value.isoformat()}
    if isinstance(value, decimal.Decimal):
        return {"decimal": str(value)}
    raise TypeError(f"a key value of type {type(value).__name__} has no JSON form: {value!r}")


def _untagged(value: dict[str, str]) -> Any:
    ((kind, text),) = value.items()
    if kind == "timestamp":
        return datetime.datetime.fromisoformat(text)
    if kind == "date":
        return datetime.date.fromisoformat(text)
    return decimal.Decimal(text)


def encode_key(key: Key) -> str:
    """A key (a tuple in key-column order) as the JSON the ledger stores.

    >>> encode_key((7, "north", datetime.date(2026, 11, 21)))
    '[7, "north", {"date": "2026-11-21"}]'
    """
    return json.dumps(list(key), default=_tagged, ensure_ascii=False)


def decode_key(text: str) -> Key:
    """The key ``encode_key`` stored.

    >>> decode_key('[7, "north", {"date": "2026-11-21"}]')
    (7, 'north', datetime.date(2026, 11, 21))
    """
    return tuple(json.loads(text, object_hook=_untagged))


@dataclass(frozen=True)
class StageReads:
    """The pending reads of one partial stage: those its processed epochs can answer, and per
    epoch it has not processed, how many keys wait and what holds the epoch."""

    stage: str
    last_epoch: int | None
    ready: tuple[PendingUpquery, ...]
    waiting: Mapping[int, tuple[int, tuple[str, ...]]] = field(default_factory=dict)

    def waiting_lines(self) -> list[str]:
        """One clause per epoch waited for: keys, epoch and its holders."""
        return [
            reads_wait(self.stage, keys, epoch, holds)
            for epoch, (keys, holds) in sorted(self.waiting.items())
        ]


@dataclass(frozen=True)
class Filled:
    """What an upquery run did: the pending reads it filled and the lookups that filled them
    (one per epoch asked)."""

    stage: str
    reads: tuple[PendingUpquery, ...]
    lookups: tuple[Lookup, ...]

    @property
    def upqueried(self) -> int:
        """Keys that were holes and were filled by an upquery (the rest were present)."""
        return sum(len(found.upqueried) for found in self.lookups)


class PendingReads:
    """Pending upqueries of the partial stages of one runtime (see the module docs)."""

    def __init__(self, reads: KeyedReads) -> None:
        self.reads = reads

    @property
    def _p(self) -> str:
        return self.reads.rt.pipeline.name

    def partial(self, stage: str) -> KeyedStage:
        """The partial stage ``stage``; a full one (or one that keeps no keyed state) raises
        ``StateReadError``."""
        spec = self.reads.keyed(stage)
        if spec.partial is None:
            raise StateReadError(
                stage,
                "a full stage keeps every key: a read of it waits for its epoch "
                "(lookup with wait), it is never recorded as a pending upquery",
            )
        return spec

    def request(self, stage: str, keys: Sequence[Any], as_of: int) -> list[PendingUpquery]:
        """Record a pending read of each key of ``stage`` as of ``as_of`` (see the module
        docs); returns the pending read of each distinct key, in the order given. Keys are
        checked as ``lookup`` checks them; nothing is recorded when one is refused."""
        spec = self.partial(stage)
        if (why := epoch_problem(as_of)) is not None:
            raise StateReadError(stage, f"as_of must be an epoch ({why}): {as_of!r}")
        asked = self.reads.keys(spec, keys)
        return self.reads.rt.ledger.request_upqueries(
            self._p, stage, [encode_key(k) for k in asked], as_of
        )

    def lookup_or_request(self, stage: str, keys: Sequence[Any], as_of: int | None) -> Lookup:
        """``lookup`` without waiting; when ``stage`` is partial and has not processed
        ``as_of``, the read is recorded as pending and ``ReadPendingError`` says so (one
        line: what holds the epoch, then that the read is recorded)."""
        try:
            return self.reads.lookup(stage, keys, as_of, False)
        except StageNotReadyError as err:
            spec = self.reads.keyed(stage)
            if spec.partial is None or as_of is None:
                raise
            recorded = self.request(stage, keys, as_of)
            raise ReadPendingError(
                stage,
                as_of,
                err.holds,
                [self.reads.shown(spec, decode_key(r.key)) for r in recorded],
                read_recorded(stage, as_of),
            ) from err

    def status(self, stage: str) -> StageReads:
        """The pending reads of ``stage``: those it can answer now, and what holds the rest."""
        spec = self.partial(stage)
        last = self.reads.last_epoch(spec)
        found = self.reads.rt.ledger.pending_upqueries(self._p, stage)
        ready = tuple(r for r in found if last is not None and r.as_of <= last)
        later: dict[int, int] = {}
        for r in found:
            if r not in ready:
                later[r.as_of] = later.get(r.as_of, 0) + 1
        waiting = {
            epoch: (
                keys,
                tuple(self.reads.rt.blockers(stage, epoch) or [ready_not_run(stage, epoch)]),
            )
            for epoch, keys in later.items()
        }
        return StageReads(stage, last, ready, waiting)

    def fill(self, stage: str) -> Filled:
        """Answer the pending reads of ``stage`` that its processed epochs can answer: one
        lookup per epoch asked (it fills the holes among the keys), then mark them filled.
        A run that stops between the two leaves them pending: the next run finds them present
        and marks them."""
        spec = self.partial(stage)
        ready = self.status(stage).ready
        by_epoch: dict[int, list[PendingUpquery]] = {}
        for r in ready:
            by_epoch.setdefault(r.as_of, []).append(r)
        lookups = []
        for epoch, reads in sorted(by_epoch.items()):
            keys = [self.reads.shown(spec, decode_key(r.key)) for r in reads]
            lookups.append(self.reads.lookup(stage, keys, epoch, False))
        self.reads.rt.ledger.mark_upqueries_filled([r.upquery_id for r in ready])
        return Filled(stage, ready, tuple(lookups))
