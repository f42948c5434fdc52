"""The ledger: durable, atomic, multi-process progress and message catalog in one DuckDB file.

Every connection opens under an exclusive OS file lock and lives for one call, or for a
``session()`` that groups many calls. A commit is one transaction holding the batch's header,
its updates (the append-only log), the compacted counts (only non-zero pointstamps are kept),
the catalog entries of the messages it announces, and the input worker's capability. Readiness
and frontiers are answered by the pure ``Tracker`` over the compacted counts, so their cost
depends on what is open, not on how many epochs have closed.
"""

from __future__ import annotations

import json
import os
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from progress.antichain import Antichain
from progress.change_batch import ChangeBatch
from progress.errors import (
    ForeignLocationError,
    GraphChangeError,
    InvalidTimeError,
    LedgerError,
    LedgerSchemaError,
    UnregisteredPipelineError,
)
from progress.graph import Graph
from progress.handles import InputHandle
from progress.ledger.engine import AttachedFile
from progress.ledger.records import (
    BatchRecord,
    CommitResult,
    CountDifference,
    History,
    Hold,
    MessageEntry,
    MessageRecord,
    MessageRef,
    Origin,
    PartialBatch,
    RunRecord,
    StageStatus,
    VerifyReport,
    describe_time,
)
from progress.ledger.schema import VERSION, current_version, migrate
from progress.location import Location, Source, Target
from progress.spec import diff, from_spec, spec_hash, to_spec
from progress.timestamp import Product, Time, validate_time
from progress.tracker import Blocker, Tracker, Update

DEFAULT_PATH = Path(".epochgate") / "ledger.duckdb"
DEFAULT_LOCK_TIMEOUT = 60.0
COMPACT_EVERY = 64
"""Fold the log into the counts table once this many batches have been committed since."""


InputEffect = tuple[list[Update], list[MessageEntry], Origin]
"""What an input worker's action does: its batch, the messages it catalogs, who did it."""


def encode(t: Time) -> tuple[int, int]:
    """A time as two BIGINTs: ``(epoch, -1)`` or ``(outer, inner)``."""
    if isinstance(t, Product):
        if type(t.outer) is not int or type(t.inner) is not int:
            raise InvalidTimeError(t, "the ledger stores epochs and products of two epochs")
        return (t.outer, t.inner)
    return (t, -1)


def decode(t0: int, t1: int) -> Time:
    return t0 if t1 < 0 else Product(t0, t1)


def _location(kind: int, node: str, port: int) -> Location:
    return Source(node, port) if kind == 0 else Target(node, port)


def _kind(location: Location) -> int:
    return 0 if isinstance(location, Source) else 1


class Ledger:
    """One ledger file. Safe to use from several processes (and threads) at once."""

    def __init__(
        self,
        path: str | os.PathLike[str] = DEFAULT_PATH,
        lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
    ) -> None:
        self.path = Path(path)
        self.lock_timeout = lock_timeout
        self._guard = threading.RLock()
        self._con: Any = None
        self._file = AttachedFile(self.path, lock_timeout)
        self._depth = 0
        self._in_transaction = False
        self._graphs: dict[str, Graph] = {}
        # Valid while a session holds the lock: no other process can change them meanwhile.
        self._session_graphs: dict[str, Graph] = {}
        self._counts_through: int | None = None

    # -- connections -------------------------------------------------------------------------

    @contextmanager
    def session(self) -> Iterator[Ledger]:
        """Hold the lock and one connection across several calls (keep it short: others wait)."""
        with self._guard:
            if self._depth:
                self._depth += 1
                try:
                    yield self
                finally:
                    self._depth -= 1
                return
            with self._file.open() as con:
                found = current_version(con)
                if found > VERSION:
                    raise LedgerSchemaError(str(self.path), found, VERSION)
                if found < VERSION:
                    migrate(con, found)
                self._con, self._depth = con, 1
                try:
                    yield self
                finally:
                    self._con, self._depth = None, 0
                    self._session_graphs.clear()
                    self._counts_through = None

    @contextmanager
    def _transaction(self) -> Iterator[Any]:
        with self.session():
            con = self._con
            if self._in_transaction:  # inside atomic(): the outermost one commits
                yield con
                return
            con.execute("BEGIN TRANSACTION")
            self._in_transaction = True
            try:
                yield con
            except BaseException:
                con.execute("ROLLBACK")
                self._session_graphs.clear()
                self._counts_through = None
                raise
            finally:
                self._in_transaction = False
            con.execute("COMMIT")

    @contextmanager
    def atomic(self) -> Iterator[Ledger]:
        """Several commits, of one pipeline or several (an iterative stage and its scope), in
        one transaction: all of them or none."""
        with self._transaction():
            yield self

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self.session():
            return self._con.execute(sql, list(params)).fetchall()  # type: ignore[no-any-return]

    # -- graphs ------------------------------------------------------------------------------

    def register(self, pipeline: str, graph: Graph, *, from_start: bool = False) -> str:
        """Register ``graph`` as ``pipeline``'s. Returns ``registered``, ``unchanged`` or
        ``extended``.

        Re-registering the same graph does nothing. A graph that only adds stages is accepted:
        its new stages see messages announced from now on, and with ``from_start`` also every
        current message their upstream stages have already produced. Any other change raises
        ``GraphChangeError`` naming each difference.
        """
        spec = to_spec(graph)
        digest = spec_hash(spec)
        with self._transaction() as con:
            row = con.execute(
                "SELECT hash, spec FROM graphs WHERE pipeline = ?", [pipeline]
            ).fetchone()
            if row is not None and row[0] == digest:
                return "unchanged"
            if row is None:
                con.execute(
                    "INSERT INTO graphs VALUES (?, ?, ?, now())",
                    [pipeline, digest, json.dumps(spec)],
                )
                added = list(graph.nodes)
                announce: list[Update] = []
                outcome = "registered"
            else:
                change = diff(json.loads(row[1]), spec)
                if not change.only_adds:
                    raise GraphChangeError(pipeline, change.refused)
                con.execute(
                    "UPDATE graphs SET hash = ?, spec = ?, registered_at = now() "
                    "WHERE pipeline = ?",
                    [digest, json.dumps(spec), pipeline],
                )
                added = list(change.added_nodes)
                announce = self._reannounce(con, pipeline, change.added_edges) if from_start else []
                outcome = "extended"
            self._graphs[digest] = self._session_graphs[pipeline] = graph
            initial = [
                (src, graph.minimum, spec_.workers)
                for name in added
                for spec_ in (graph.node(name),)
                if spec_.workers
                for src in spec_.sources()
            ]
            self._write_batch(
                con,
                pipeline=pipeline,
                graph=graph,
                batch=initial + announce,
                key=f"{outcome}:{digest}",
                origin=Origin("register"),
                messages=(),
            )
            for name in added:
                spec_ = graph.node(name)
                if not spec_.inputs:
                    t0, t1 = encode(graph.minimum)
                    for w in range(spec_.workers):
                        con.execute(
                            "INSERT INTO capabilities VALUES (?, ?, ?, ?, ?)",
                            [pipeline, name, w, t0, t1],
                        )
            return outcome

    def _reannounce(
        self, con: Any, pipeline: str, edges: Sequence[tuple[str, int, str, int]]
    ) -> list[Update]:
        out: list[Update] = []
        for src, port, tgt, inp in edges:
            rows = con.execute(
                "SELECT t0, t1 FROM messages "
                "WHERE pipeline = ? AND stage = ? AND port = ? AND current",
                [pipeline, src, port],
            ).fetchall()
            out.extend((Target(tgt, inp), decode(t0, t1), 1) for t0, t1 in rows)
        return out

    def pipelines(self) -> list[str]:
        """The registered pipelines (not the scopes of their iterative stages)."""
        rows = self._query("SELECT pipeline FROM graphs ORDER BY pipeline")
        return [r[0] for r in rows if "." not in r[0]]

    def graph(self, pipeline: str) -> Graph:
        """The registered graph of ``pipeline``."""
        with self.session():
            return self._graph(self._con, pipeline)

    def _graph(self, con: Any, pipeline: str) -> Graph:
        graph = self._session_graphs.get(pipeline)
        if graph is not None:
            return graph
        row = con.execute("SELECT hash FROM graphs WHERE pipeline = ?", [pipeline]).fetchone()
        if row is None:
            known = [r[0] for r in con.execute("SELECT pipeline FROM graphs ORDER BY 1").fetchall()]
            raise UnregisteredPipelineError(pipeline, known)
        graph = self._graphs.get(row[0])
        if graph is None:
            spec = con.execute("SELECT spec FROM graphs WHERE pipeline = ?", [pipeline]).fetchone()
            graph = self._graphs[row[0]] = from_spec(json.loads(spec[0]))
        self._session_graphs[pipeline] = graph
        return graph

    # -- commits -----------------------------------------------------------------------------

    def commit(
        self,
        pipeline: str,
        batch: Iterable[Update],
        *,
        key: str,
        messages: Sequence[MessageEntry] = (),
        origin: Origin | None = None,
    ) -> CommitResult:
        """Commit a progress batch and the catalog entries of the messages it announces, in one
        transaction. A key already committed makes this a no-op that returns the first commit.
        Updates to locations outside the registered graph are refused; nothing is committed."""
        with self._transaction() as con:
            first = self._committed(con, pipeline, key)
            if first is not None:
                return first
            graph = self._graph(con, pipeline)
            return self._write_batch(
                con,
                pipeline=pipeline,
                graph=graph,
                batch=list(batch),
                key=key,
                origin=origin or Origin.system(),
                messages=messages,
            )

    def _watermark(self, con: Any) -> int:
        """The last batch folded into the counts table."""
        if self._counts_through is None:
            row = con.execute("SELECT value FROM meta WHERE key = 'counts_through'").fetchone()
            self._counts_through = int(row[0])
        return self._counts_through

    def compact(self) -> None:
        """Fold every committed batch into the counts table now (commits do it every
        ``COMPACT_EVERY`` batches on their own)."""
        with self._transaction() as con:
            last = con.execute("SELECT coalesce(max(batch_id), 0) FROM batches").fetchone()[0]
            if last > self._watermark(con):
                self._compact(con, last)

    def _compact(self, con: Any, through: int) -> None:
        """Fold the updates of batches after the watermark, up to ``through``, into counts."""
        con.execute(
            """
            MERGE INTO counts c USING (
                SELECT pipeline, kind, node, port, t0, t1, sum(delta) AS delta FROM updates
                WHERE batch_id > ? AND batch_id <= ? GROUP BY ALL HAVING sum(delta) <> 0
            ) n
            ON c.pipeline = n.pipeline AND c.kind = n.kind AND c.node = n.node
               AND c.port = n.port AND c.t0 = n.t0 AND c.t1 = n.t1
            WHEN MATCHED AND c.count + n.delta = 0 THEN DELETE
            WHEN MATCHED THEN UPDATE SET count = c.count + n.delta
            WHEN NOT MATCHED THEN
                INSERT VALUES (n.pipeline, n.kind, n.node, n.port, n.t0, n.t1, n.delta)
            """,
            [self._watermark(con), through],
        )
        con.execute("UPDATE meta SET value = ? WHERE key = 'counts_through'", [str(through)])
        self._counts_through = through

    def committed(self, pipeline: str, key: str) -> CommitResult | None:
        """The commit made under ``key``, if any."""
        with self.session():
            return self._committed(self._con, pipeline, key)

    @staticmethod
    def _committed(con: Any, pipeline: str, key: str) -> CommitResult | None:
        row = con.execute(
            "SELECT batch_id FROM batches WHERE pipeline = ? AND key = ?", [pipeline, key]
        ).fetchone()
        return None if row is None else CommitResult(row[0], key, repeated=True)

    def _write_batch(
        self,
        con: Any,
        *,
        pipeline: str,
        graph: Graph,
        batch: list[Update],
        key: str,
        origin: Origin,
        messages: Sequence[MessageEntry],
    ) -> CommitResult:
        compacted: ChangeBatch[tuple[int, str, int, int, int]] = ChangeBatch()
        for location, time, delta in batch:
            if location not in graph.index:
                raise ForeignLocationError(pipeline, location, key)
            validate_time(time, graph.minimum)
            compacted.update((_kind(location), location.node, location.port, *encode(time)), delta)
        for m in messages:
            graph.node(m.stage)
            validate_time(m.time, graph.minimum)
        rows = compacted.items()
        o0, o1 = encode(origin.time) if origin.time is not None else (None, None)
        batch_id: int = con.execute(
            "INSERT INTO batches VALUES (nextval('batch_ids'), ?, ?, ?, ?, ?, ?, ?, ?, now()) "
            "RETURNING batch_id",
            [pipeline, key, origin.kind, origin.node, origin.worker, o0, o1, len(rows)],
        ).fetchone()[0]
        if rows:
            # One list parameter per column: far cheaper to bind than a row of parameters each.
            columns = [list(c) for c in zip(*[(*item, delta) for item, delta in rows], strict=True)]
            con.execute(
                "INSERT INTO updates SELECT ?, ?, unnest(?), unnest(?), unnest(?), unnest(?), "
                "unnest(?), unnest(?)",
                [batch_id, pipeline, *columns],
            )
        if batch_id - self._watermark(con) >= COMPACT_EVERY:
            self._compact(con, batch_id)
        for m in messages:
            t0, t1 = encode(m.time)
            if m.replaces:
                con.execute(
                    "UPDATE messages SET current = false WHERE pipeline = ? AND stage = ? "
                    "AND port = ? AND t0 = ? AND t1 = ? AND current",
                    [pipeline, m.stage, m.port, t0, t1],
                )
            con.execute(
                "INSERT INTO messages VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, true)",
                [pipeline, m.stage, m.port, t0, t1, m.attempt, m.path, m.rows, m.bytes, batch_id],
            )
            if m.reads:
                r0, r1 = encode(m.run_time if m.run_time is not None else m.time)
                refs = [(r.stage, r.port, *encode(r.time), r.attempt) for r in m.reads]
                columns = [list(c) for c in zip(*refs, strict=True)]
                con.execute(
                    "INSERT INTO reads SELECT ?, ?, ?, ?, ?, ?, unnest(?), unnest(?), "
                    "unnest(?), unnest(?), unnest(?)",
                    [pipeline, batch_id, m.stage, r0, r1, m.attempt, *columns],
                )
        return CommitResult(batch_id, key, repeated=False)

    # -- input workers -----------------------------------------------------------------------

    def worker_time(self, pipeline: str, node: str, worker: int) -> Time | None:
        """Where an input worker's capability stands (``None`` once closed)."""
        with self.session():
            return self._worker_time(self._con, pipeline, node, worker)

    @staticmethod
    def _worker_time(con: Any, pipeline: str, node: str, worker: int) -> Time | None:
        row = con.execute(
            "SELECT t0, t1 FROM capabilities WHERE pipeline = ? AND node = ? AND worker = ?",
            [pipeline, node, worker],
        ).fetchone()
        if row is None:
            raise LedgerError(f"pipeline {pipeline!r}: input {node!r} has no worker {worker}")
        return None if row[0] is None else decode(row[0], row[1])

    def send(
        self,
        pipeline: str,
        node: str,
        worker: int,
        message: MessageEntry | None = None,
        *,
        key: str | None = None,
        port: int = 0,
    ) -> CommitResult:
        """Commit a message from an input worker at its current time (idempotent by key)."""

        def act(handle: InputHandle, con: Any) -> InputEffect:
            time = handle.time
            batch = handle.send(port)
            entries = []
            if message is not None:
                entries.append(
                    MessageEntry(
                        node, port, time, message.attempt, message.path, message.rows, message.bytes
                    )
                )
            return batch, entries, Origin("send", node, worker, time)

        attempt = message.attempt if message is not None else uuid.uuid4().hex
        return self._input_action(
            pipeline, node, worker, key or f"send:{node}:{worker}:{attempt}", act
        )

    def advance(
        self, pipeline: str, node: str, worker: int, time: Time, *, seal: bool = False
    ) -> CommitResult:
        """Move an input worker's capability forward to ``time``.

        With ``seal``, every epoch it passes for which this worker sent nothing gets an empty
        message, in the same transaction: the worker declares those epochs complete (and
        empty), so every stage downstream runs them."""

        def act(handle: InputHandle, con: Any) -> InputEffect:
            origin = Origin.input(node, worker)
            if not seal or time == handle.time:
                return handle.advance_to(time), [], origin
            start = handle.time
            if type(start) is not int or type(time) is not int:
                raise LedgerError(f"input {node!r}: sealing applies to int epochs only")
            InputHandle.resume(handle.graph, node, worker, start).advance_to(time)  # no going back
            sent = {
                row[0]
                for row in con.execute(
                    "SELECT DISTINCT t0 FROM batches WHERE pipeline = ? AND origin = 'send' "
                    "AND node = ? AND worker = ? AND t0 >= ? AND t0 < ?",
                    [pipeline, node, worker, start, time],
                ).fetchall()
            }
            batch: list[Update] = []
            entries: list[MessageEntry] = []
            for epoch in range(start, time):
                if epoch in sent:
                    continue
                batch += handle.advance_to(epoch)
                for port in range(handle.graph.node(node).outputs):
                    batch += handle.send(port)
                    entries.append(
                        MessageEntry(node, port, epoch, f"empty:{node}:{worker}:{epoch}")
                    )
            batch += handle.advance_to(time)
            return batch, entries, origin

        return self._input_action(
            pipeline, node, worker, f"advance:{node}:{worker}:{json.dumps(encode(time))}", act
        )

    def close(self, pipeline: str, node: str, worker: int) -> CommitResult:
        """Drop an input worker's capability: nothing more will come from it."""
        return self._input_action(
            pipeline,
            node,
            worker,
            f"close:{node}:{worker}",
            lambda h, con: (h.close(), [], Origin.input(node, worker)),
        )

    def _input_action(
        self,
        pipeline: str,
        node: str,
        worker: int,
        key: str,
        act: Callable[[InputHandle, Any], InputEffect],
    ) -> CommitResult:
        with self._transaction() as con:
            first = self._committed(con, pipeline, key)
            if first is not None:
                return first
            graph = self._graph(con, pipeline)
            handle = InputHandle.resume(
                graph, node, worker, self._worker_time(con, pipeline, node, worker)
            )
            batch, messages, origin = act(handle, con)
            result = self._write_batch(
                con,
                pipeline=pipeline,
                graph=graph,
                batch=batch,
                key=key,
                origin=origin,
                messages=messages,
            )
            t = None if handle.closed else encode(handle.time)
            con.execute(
                "UPDATE capabilities SET t0 = ?, t1 = ? "
                "WHERE pipeline = ? AND node = ? AND worker = ?",
                [t[0] if t else None, t[1] if t else None, pipeline, node, worker],
            )
            return result

    # -- runs --------------------------------------------------------------------------------

    def start_run(self, pipeline: str, stage: str, time: Time, attempt: str | None = None) -> str:
        """Record that a run of ``(stage, time)`` started; returns its run id."""
        run_id = uuid.uuid4().hex
        t0, t1 = encode(time)
        with self._transaction() as con:
            self._graph(con, pipeline).node(stage)
            con.execute(
                "INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, 'running', ?, now(), NULL, NULL, NULL)",
                [run_id, pipeline, stage, t0, t1, attempt, os.getpid()],
            )
        return run_id

    def finish_run(
        self, run_id: str, status: str, batch_id: int | None = None, error: str | None = None
    ) -> None:
        """Record how a run ended: ``succeeded``, ``skipped`` or ``failed``."""
        with self._transaction() as con:
            con.execute(
                "UPDATE runs SET status = ?, finished_at = now(), batch_id = ?, error = ? "
                "WHERE run_id = ?",
                [status, batch_id, error, run_id],
            )

    # -- questions ---------------------------------------------------------------------------

    def tracker(self, pipeline: str) -> Tracker:
        """A tracker holding the pipeline's current counts (a snapshot)."""
        with self.session():
            return self._tracker(self._con, pipeline)

    def _tracker(self, con: Any, pipeline: str) -> Tracker:
        graph = self._graph(con, pipeline)
        tracker = Tracker(graph)
        rows = con.execute(
            """
            SELECT kind, node, port, t0, t1, sum(count) FROM (
                SELECT kind, node, port, t0, t1, count FROM counts WHERE pipeline = ?
                UNION ALL
                SELECT kind, node, port, t0, t1, delta FROM updates
                WHERE pipeline = ? AND batch_id > ?
            ) GROUP BY ALL HAVING sum(count) <> 0
            """,
            [pipeline, pipeline, self._watermark(con)],
        ).fetchall()
        tracker.apply([(_location(k, n, p), decode(t0, t1), c) for k, n, p, t0, t1, c in rows])
        return tracker

    def frontier(self, pipeline: str, location: Location) -> Antichain[Time]:
        return self.tracker(pipeline).frontier(location)

    def ready(self, pipeline: str, stage: str, time: Time) -> bool:
        return self.tracker(pipeline).ready(stage, time)

    def blockers(self, pipeline: str, stage: str, time: Time) -> list[Hold]:
        """Who keeps ``(stage, time)`` from being ready, in plain words."""
        with self.session():
            tracker = self._tracker(self._con, pipeline)
            return self._holds(self._con, pipeline, tracker, stage, time)

    def _holds(
        self,
        con: Any,
        pipeline: str,
        tracker: Tracker,
        stage: str,
        time: Time,
    ) -> list[Hold]:
        graph = tracker.graph
        holds: list[Hold] = []
        waiting: dict[tuple[str, Time], list[Blocker]] = {}
        for b in tracker.blockers(stage, time):
            node = b.location.node
            when = describe_time(b.time)
            if isinstance(b.location, Source) and not graph.node(node).inputs:
                t0, t1 = encode(b.time)
                workers = tuple(
                    r[0]
                    for r in con.execute(
                        "SELECT worker FROM capabilities "
                        "WHERE pipeline = ? AND node = ? AND t0 = ? AND t1 = ? ORDER BY worker",
                        [pipeline, node, t0, t1],
                    ).fetchall()
                )
                for w in workers or (None,):
                    who = f"worker {w}" if w is not None else f"{b.count} worker(s)"
                    held = (w,) if w is not None else ()
                    holds.append(Hold(b, f"source {node}, {who}, still holds {when}", held))
            elif isinstance(b.location, Target):
                waiting.setdefault((node, b.time), []).append(b)
            else:
                holds.append(Hold(b, f"stage {node} still holds {when}"))
        for (node, t), found in waiting.items():  # one line per stage, whatever its ports
            count, when = sum(b.count for b in found), describe_time(t)
            if node == stage:
                text = f"{stage} must first run {when} ({count} message(s) waiting)"
            else:
                text = f"stage {node} has not run {when} yet ({count} message(s) waiting)"
            holds.append(Hold(found[0], text))
        return holds

    def message(self, pipeline: str, stage: str, port: int, time: Time) -> list[MessageRecord]:
        """The current messages committed at ``(stage, port, time)``."""
        t0, t1 = encode(time)
        rows = self._query(
            "SELECT stage, port, t0, t1, attempt, path, rows, bytes, batch_id, current "
            "FROM messages WHERE pipeline = ? AND stage = ? AND port = ? AND t0 = ? AND t1 = ? "
            "AND current ORDER BY batch_id",
            [pipeline, stage, port, t0, t1],
        )
        return [_message(r) for r in rows]

    def live_paths(self, pipeline: str) -> list[str]:
        """Every data path the pipeline may still read or is writing: current messages, and
        the attempts of runs whose process is alive."""
        with self.session():
            paths = [
                r[0]
                for r in self._query(
                    "SELECT path FROM messages WHERE pipeline = ? AND current AND path IS NOT NULL",
                    [pipeline],
                )
            ]
            running = self._query(
                "SELECT attempt, pid FROM runs WHERE pipeline = ? AND status = 'running'",
                [pipeline],
            )
        return paths + [f"attempt={a}" for a, pid in running if a and _alive(pid)]

    def done_epochs(self, pipeline: str, stage: str) -> list[Time]:
        """The times ``stage`` has run (committed a run batch for), in order."""
        rows = self._query(
            "SELECT DISTINCT t0, t1 FROM batches WHERE pipeline = ? AND origin = 'stage' "
            "AND node = ? AND key LIKE 'run:%' ORDER BY t0, t1",
            [pipeline, stage],
        )
        return [decode(t0, t1) for t0, t1 in rows]

    def reads(self, pipeline: str, stage: str, time: Time) -> list[MessageRef]:
        """The input messages (and their attempts) that the current output of the run
        ``(stage, time)`` read: its message-level lineage."""
        t0, t1 = encode(time)
        rows = self._query(
            """
            SELECT DISTINCT r.input_stage, r.input_port, r.input_t0, r.input_t1, r.input_attempt
            FROM reads r JOIN messages o ON o.pipeline = r.pipeline AND o.stage = r.stage
                AND o.attempt = r.attempt AND o.current
            WHERE r.pipeline = ? AND r.stage = ? AND r.t0 = ? AND r.t1 = ?
            ORDER BY ALL
            """,
            [pipeline, stage, t0, t1],
        )
        return [MessageRef(s, p, decode(a, b), att) for s, p, a, b, att in rows]

    def stale(self, pipeline: str) -> list[tuple[str, Time]]:
        """Runs ``(stage, time)`` whose current output read an input attempt that has since
        been replaced: they must run again (a revision replaced what they read)."""
        rows = self._query(
            """
            SELECT DISTINCT r.stage, r.t0, r.t1 FROM reads r
            JOIN messages o ON o.pipeline = r.pipeline AND o.stage = r.stage
                AND o.attempt = r.attempt AND o.current
            JOIN messages i ON i.pipeline = r.pipeline AND i.stage = r.input_stage
                AND i.port = r.input_port AND i.t0 = r.input_t0 AND i.t1 = r.input_t1
                AND i.attempt = r.input_attempt AND NOT i.current
            WHERE r.pipeline = ?
            ORDER BY r.t0, r.t1, r.stage
            """,
            [pipeline],
        )
        return [(stage, decode(t0, t1)) for stage, t0, t1 in rows]

    def latest_message(self, pipeline: str, stage: str, port: int) -> MessageRecord | None:
        """The most recently committed current message of ``(stage, port)`` with data."""
        rows = self._query(
            "SELECT stage, port, t0, t1, attempt, path, rows, bytes, batch_id, current "
            "FROM messages WHERE pipeline = ? AND stage = ? AND port = ? AND current "
            "AND path IS NOT NULL ORDER BY batch_id DESC LIMIT 1",
            [pipeline, stage, port],
        )
        return _message(rows[0]) if rows else None

    def history(self, pipeline: str, stage: str, time: Time) -> History:
        """Every batch, message attempt and run recorded for ``(stage, time)``."""
        t0, t1 = encode(time)
        with self.session():
            self._graph(self._con, pipeline).node(stage)
            batches = self._query(
                "SELECT batch_id, key, origin, node, worker, t0, t1, n_updates, committed_at "
                "FROM batches WHERE pipeline = ? AND node = ? AND ((t0 = ? AND t1 = ?) OR "
                "(origin IN ('send', 'input') AND batch_id IN (SELECT batch_id FROM messages WHERE "
                "pipeline = ? AND stage = ? AND t0 = ? AND t1 = ?))) ORDER BY batch_id",
                [pipeline, stage, t0, t1, pipeline, stage, t0, t1],
            )
            messages = self._query(
                "SELECT stage, port, t0, t1, attempt, path, rows, bytes, batch_id, current FROM "
                "messages WHERE pipeline = ? AND stage = ? AND t0 = ? AND t1 = ? ORDER BY batch_id",
                [pipeline, stage, t0, t1],
            )
            runs = self._query(
                "SELECT run_id, stage, t0, t1, attempt, status, pid, started_at, finished_at, "
                "batch_id, error FROM runs WHERE pipeline = ? AND stage = ? AND t0 = ? AND t1 = ? "
                "ORDER BY started_at",
                [pipeline, stage, t0, t1],
            )
        return History(
            pipeline,
            stage,
            time,
            tuple(
                BatchRecord(b, k, o, n, w, None if a is None else decode(a, c), u, at)
                for b, k, o, n, w, a, c, u, at in batches
            ),
            tuple(_message(r) for r in messages),
            tuple(
                RunRecord(r, s, decode(a, c), att, st, pid, sa, fa, bid, err)
                for r, s, a, c, att, st, pid, sa, fa, bid, err in runs
            ),
        )

    def status(self, pipeline: str) -> list[StageStatus]:
        """Each stage's input frontier and epochs done, ready, running and waiting, with the
        blockers of the oldest waiting epoch."""
        with self.session():
            con = self._con
            tracker = self._tracker(con, pipeline)
            graph = tracker.graph
            done: dict[str, list[Time]] = {}
            for node, t0, t1 in con.execute(
                "SELECT DISTINCT node, t0, t1 FROM batches WHERE pipeline = ? AND origin = 'stage'",
                [pipeline],
            ).fetchall():
                done.setdefault(node, []).append(decode(t0, t1))
            running: dict[str, list[Time]] = {}
            for node, t0, t1, pid in con.execute(
                "SELECT DISTINCT stage, t0, t1, pid FROM runs "
                "WHERE pipeline = ? AND status = 'running'",
                [pipeline],
            ).fetchall():
                if _alive(pid):
                    running.setdefault(node, []).append(decode(t0, t1))
            pending: dict[str, set[Time]] = {}
            for location, t, _ in tracker.pointstamps():
                if isinstance(location, Target):
                    pending.setdefault(location.node, set()).add(t)
            stale: dict[str, list[Time]] = {}
            for node, t in self.stale(pipeline):
                stale.setdefault(node, []).append(t)
            workers: dict[str, list[tuple[int, Time | None]]] = {}
            for node, w, t0, t1 in con.execute(
                "SELECT node, worker, t0, t1 FROM capabilities WHERE pipeline = ? ORDER BY ALL",
                [pipeline],
            ).fetchall():
                workers.setdefault(node, []).append((w, None if t0 is None else decode(t0, t1)))
            rounds = self._rounds(con, pipeline)
            out: list[StageStatus] = []
            order = graph.depths()
            for name, spec in sorted(graph.nodes.items(), key=lambda kv: (order[kv[0]], kv[0])):
                frontier: set[Time] = set()
                for target in spec.targets():
                    frontier.update(tracker.frontier(target).elements)
                waiting_all = sorted(pending.get(name, ()))
                run_now = sorted(running.get(name, ()))
                ready = [t for t in waiting_all if tracker.ready(name, t) and t not in run_now]
                waiting = [t for t in waiting_all if t not in ready and t not in run_now]
                holds: tuple[Hold, ...] = ()
                if waiting:
                    holds = tuple(self._holds(con, pipeline, tracker, name, waiting[0]))
                out.append(
                    StageStatus(
                        pipeline,
                        name,
                        spec.inputs == 0,
                        tuple(sorted(frontier)),
                        tuple(sorted(done.get(name, ()))),
                        tuple(ready),
                        tuple(run_now),
                        tuple(waiting),
                        holds,
                        tuple(stale.get(name, ())),
                        tuple(workers.get(name, ())),
                        tuple(sorted(rounds.get(name, ()))),
                    )
                )
            return out

    def _rounds(self, con: Any, pipeline: str) -> dict[str, list[Time]]:
        """Per iterative stage of ``pipeline``, the ``Product(epoch, round)`` times waiting in
        its scope: rounds committed whose epoch has not reached its fixed point."""
        out: dict[str, list[Time]] = {}
        for (scope,) in con.execute(
            "SELECT pipeline FROM graphs WHERE starts_with(pipeline, ?)", [pipeline + "."]
        ).fetchall():
            stage = scope.removeprefix(pipeline + ".")
            for location, t, _ in self._tracker(con, scope).pointstamps():
                if isinstance(location, Target):
                    out.setdefault(stage, []).append(t)
        return out

    # -- integrity ---------------------------------------------------------------------------

    def verify(self) -> VerifyReport:
        """Recompute the counts table from the log of batches it has folded in, and check that
        every batch holds all of its updates (and no update lacks its batch)."""
        with self.session():
            con = self._con
            n_batches = con.execute("SELECT count(*) FROM batches").fetchone()[0]
            differences = con.execute(
                """
                WITH log AS (
                    SELECT pipeline, kind, node, port, t0, t1, sum(delta) AS total
                    FROM updates WHERE batch_id <= ?
                    GROUP BY ALL HAVING sum(delta) <> 0
                )
                SELECT coalesce(l.pipeline, c.pipeline), coalesce(l.kind, c.kind),
                       coalesce(l.node, c.node), coalesce(l.port, c.port),
                       coalesce(l.t0, c.t0), coalesce(l.t1, c.t1),
                       coalesce(l.total, 0), coalesce(c.count, 0)
                FROM log l FULL OUTER JOIN counts c
                  ON l.pipeline = c.pipeline AND l.kind = c.kind AND l.node = c.node
                 AND l.port = c.port AND l.t0 = c.t0 AND l.t1 = c.t1
                WHERE coalesce(l.total, 0) <> coalesce(c.count, 0)
                ORDER BY 1, 2, 3, 4, 5, 6
                """,
                [self._watermark(con)],
            ).fetchall()
            partial = con.execute(
                """
                SELECT b.batch_id, b.n_updates, count(u.batch_id)
                FROM batches b LEFT JOIN updates u USING (batch_id)
                GROUP BY b.batch_id, b.n_updates HAVING count(u.batch_id) <> b.n_updates
                UNION ALL
                SELECT u.batch_id, 0, count(*) FROM updates u ANTI JOIN batches b USING (batch_id)
                GROUP BY u.batch_id
                ORDER BY 1
                """
            ).fetchall()
        return VerifyReport(
            n_batches,
            tuple(
                CountDifference(p, _location(k, n, port), decode(t0, t1), log, cnt)
                for p, k, n, port, t0, t1, log, cnt in differences
            ),
            tuple(PartialBatch(b, e, f) for b, e, f in partial),
        )


def _alive(pid: int | None) -> bool:
    """Whether the process that recorded a run still exists (a killed run never finishes)."""
    if not pid:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _message(r: tuple[Any, ...]) -> MessageRecord:
    stage, port, t0, t1, attempt, path, rows, nbytes, batch_id, current = r
    return MessageRecord(
        stage, port, decode(t0, t1), attempt, path, rows, nbytes, batch_id, current
    )
