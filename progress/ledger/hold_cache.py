"""What a process may remember of the ledger from one session to the next of the same hold.

A hold is one stretch of time in which this process keeps the file locked and attached
(``AttachedFile.holds`` counts them): a ledger's linger and ``Ledger.held`` make one hold span
many sessions, a run's whole loop of commits and admissions. Within a hold no other process can
change the file, so what a session read stays true for the next session of the same hold, but
for what this process writes, which its writers apply here as they write it:

- the graphs of the pipelines, the counts watermark and the captured pipelines;
- each pipeline's counts (the compacted counts with the log's tail), in the ledger's columns:
  a commit adds its batch's updates, so reading the counts after a commit costs no query;
- whether a pipeline has a replaced message (one no longer current): until it has one, no
  output can be stale, and ``stale`` needs no query;
- where each input worker's capability stands, as its actions move it;
- for the input workers this process moved, whether each sent at the time it moved to (an
  advance past that time then seals it, or not, with no query of the sends);
- the keys found not committed (asked, or a run found pending in the counts), until this
  process commits under one: a run's commit then asks no query of its key;
- the current messages at a ``(stage, port, time)``, as last read, with the messages this
  process commits there, until it replaces one there; and, read once in a hold that asks for
  more than one place, the newest epoch with a message at each ``(stage, port)``: a place past
  it held nothing then, so its messages are those this process has committed there since (none
  to read), unless it replaced one there;
- each reader's unmarked messages of a port (``progress.ledger.marks``), as last read, with the
  messages this process commits there: a ``run()`` that finds its sinks' new messages asks no
  query until this process replaces or marks a message there.

A new hold starts empty (another process may have written between two holds), and a
rolled-back transaction empties the cache (it may describe undone writes).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from progress.graph import Graph
from progress.ledger.records import MessageRecord
from progress.timestamp import Time, time_to_columns

CountKey = tuple[int, str, int, int, int]
"""A pointstamp in the ledger's columns: ``(kind, node, port, t0, t1)``."""


def _time_order(m: MessageRecord) -> tuple[int, int, int]:
    """Messages ordered as the ledger's reads order them: by time, then batch."""
    return (*time_to_columns(m.time), m.batch_id)


@dataclass
class _Counts:
    graph: Graph
    counts: dict[CountKey, int]


@dataclass
class HoldCache:
    """What one hold of the file has read, with this process's own writes applied."""

    hold: int
    graphs: dict[str, Graph] = field(default_factory=dict)
    counts_through: int | None = None
    captured: frozenset[str] | None = None
    replaced: dict[str, bool] = field(default_factory=dict)
    """Whether each pipeline has a replaced message (set ``True`` once this process replaces
    one)."""
    workers: dict[tuple[str, str, int], Time | None] = field(default_factory=dict)
    """Where input workers' capabilities stand, by ``(pipeline, node, worker)``."""
    arrivals: dict[tuple[str, str, int], tuple[Time, bool]] = field(default_factory=dict)
    """By ``(pipeline, node, worker)``: the time this process's advance moved the worker to
    within this hold, and whether a send of this process committed there since. A worker sent
    at a time whenever this says so; it sent nothing there when this says not (no other process
    writes within the hold)."""
    uncommitted: set[tuple[str, str]] = field(default_factory=set)
    """By ``(pipeline, key)``: the keys nothing is committed under (until this process
    commits under one)."""
    unmarked: dict[tuple[str, str, int, str], tuple[MessageRecord, ...]] = field(
        default_factory=dict
    )
    """By ``(pipeline, stage, port, reader)``: the reader's unmarked messages there as last read
    (dropped by ``changed``)."""
    messages: dict[tuple[str, str, int], dict[tuple[int, int], tuple[MessageRecord, ...]]] = field(
        default_factory=dict
    )
    """By ``(pipeline, stage, port)``, then time ``(t0, t1)``: the current messages there as
    last read (a time's dropped by ``changed`` there)."""
    newest: dict[str, dict[tuple[str, int], int]] = field(default_factory=dict)
    """By pipeline, then ``(stage, port)``: the newest epoch (``t0``) with a message there,
    current or not, when read in this hold (a port with none is absent)."""
    rewritten: set[tuple[str, str, int, tuple[int, int]]] = field(default_factory=set)
    """The places ``(pipeline, stage, port, time)`` where this process replaced messages in
    this hold (``past_newest`` does not answer for them: what is current there is read)."""
    misses: int = 0
    """How many queries of current messages this hold has made."""
    _counts: dict[str, _Counts] = field(default_factory=dict)

    def clear(self) -> None:
        """Forget everything (a rolled-back transaction may have changed what was read)."""
        self.graphs.clear()
        self.counts_through = self.captured = None
        self._counts.clear()
        self.replaced.clear()
        self.workers.clear()
        self.arrivals.clear()
        self.uncommitted.clear()
        self.unmarked.clear()
        self.messages.clear()
        self.newest.clear()
        self.rewritten.clear()

    def changed(self, pipeline: str, stage: str, port: int, at: tuple[int, int] | None) -> None:
        """This process replaced the messages at ``(stage, port)`` at time ``at`` (its
        columns), or marked the port (``at`` None): what was read of the port's unmarked
        messages is out of date, and of its current messages at ``at`` (a replacement changes
        those of its own time only)."""
        for key in [k for k in self.unmarked if k[:3] == (pipeline, stage, port)]:
            del self.unmarked[key]
        if at is not None:
            self.messages.get((pipeline, stage, port), {}).pop(at, None)
            self.rewritten.add((pipeline, stage, port, at))

    def past_newest(self, pipeline: str, stage: str, port: int, at: tuple[int, int]) -> bool:
        """Whether ``(stage, port)`` had no message at time ``at`` (its columns) when
        ``newest`` was read, and this process has replaced none there since: its current
        messages are those this process added there since."""
        newest = self.newest.get(pipeline)
        if newest is None or (pipeline, stage, port, at) in self.rewritten:
            return False
        last = newest.get((stage, port))
        return last is None or at[0] > last

    def added(self, pipeline: str, record: MessageRecord, at: tuple[int, int]) -> None:
        """This process committed ``record``, a current message at time ``at`` (its columns),
        after any replacement there: the current messages read at that time gain it (the newest
        batch comes last), or are it alone past the newest epoch read (``past_newest``), and so
        do the unmarked messages of every reader of its port (its batch is past every mark), in
        time order."""
        port = (pipeline, record.stage, record.port)
        read = self.messages.get(port, {})
        if at in read:
            read[at] = (*read[at], record)
        elif self.past_newest(pipeline, record.stage, record.port, at):
            self.messages.setdefault(port, {})[at] = (record,)
        for key, found in self.unmarked.items():
            if key[:3] == port:
                self.unmarked[key] = tuple(sorted((*found, record), key=_time_order))

    def counts(self, pipeline: str, graph: Graph) -> list[tuple[CountKey, int]] | None:
        """The pipeline's non-zero counts, if read in this hold for ``graph``."""
        found = self._counts.get(pipeline)
        if found is None or found.graph is not graph:
            return None
        return list(found.counts.items())

    def keep_counts(
        self, pipeline: str, graph: Graph, rows: Iterable[tuple[CountKey, int]]
    ) -> None:
        """Remember the pipeline's counts, as just read for ``graph``."""
        self._counts[pipeline] = _Counts(graph, {key: count for key, count in rows if count})

    def counted(self, pipeline: str, graph: Graph, updates: Iterable[tuple[CountKey, int]]) -> None:
        """A batch of ``pipeline`` was written in this hold: add its updates to the counts
        remembered (forget them if they were read for another graph)."""
        found = self._counts.get(pipeline)
        if found is None:
            return
        if found.graph is not graph:
            del self._counts[pipeline]
            return
        counts = found.counts
        for key, delta in updates:
            total = counts.get(key, 0) + delta
            if total:
                counts[key] = total
            else:
                counts.pop(key, None)
