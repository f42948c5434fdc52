"""Questions to the ledger: counts as a tracker, who holds an epoch, messages, lineage, status.

Readiness and frontiers are answered by the pure ``Tracker`` over the compacted counts and the
log's tail, so their cost depends on what is open, not on how many epochs have closed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from progress import sentences
from progress.errors import InvalidTimeError
from progress.ledger.records import (
    BatchRecord,
    Failure,
    History,
    Hold,
    MessageRecord,
    MessageRef,
    OriginKind,
    RunKind,
    RunRecord,
    StageStatus,
)
from progress.ledger.runs import alive
from progress.ledger.schema import location_from_columns
from progress.ledger.sessions import Session
from progress.location import Source, Target
from progress.run_status import STOPS_RUN, RunStatus
from progress.timestamp import Time, less_equal, time_from_columns, time_to_columns
from progress.tracker import Blocker, Tracker

MESSAGE_COLUMNS = "stage, port, t0, t1, attempt, path, rows, bytes, batch_id, current"


def tracker(s: Session, pipeline: str) -> Tracker:
    """A tracker holding the pipeline's current counts (a snapshot): read once per hold of the
    file, then kept up to date by this process's own commits (``hold_cache``)."""
    graph = s.graph(pipeline)
    counts = s.cache.counts(pipeline, graph)
    if counts is None:
        rows = s.rows(
            """
            SELECT kind, node, port, t0, t1, sum(count) FROM (
                SELECT kind, node, port, t0, t1, count FROM counts WHERE pipeline = ?
                UNION ALL
                SELECT kind, node, port, t0, t1, delta FROM updates
                WHERE pipeline = ? AND batch_id > ?
            ) GROUP BY ALL HAVING sum(count) <> 0
            """,
            [pipeline, pipeline, s.watermark()],
        )
        counts = [((k, n, p, t0, t1), c) for k, n, p, t0, t1, c in rows]
        s.cache.keep_counts(pipeline, graph, counts)
    found = Tracker(graph)
    found.apply(
        [
            (location_from_columns(k, n, p), time_from_columns(t0, t1), c)
            for (k, n, p, t0, t1), c in counts
        ]
    )
    return found


def holds(
    s: Session,
    pipeline: str,
    tracker: Tracker,
    stage: str,
    time: Time,
    *,
    failed: dict[tuple[str, Time], Failure] | None = None,
) -> list[Hold]:
    """Who keeps ``(stage, time)`` from being ready, in plain words: one hold per input worker
    of a source, per stage holding a capability, and per stage whose input waits (``failed``:
    the pipeline's ``failures``, when the caller has read them already)."""
    graph = tracker.graph
    out: list[Hold] = []
    waiting: dict[tuple[str, Time], list[Blocker]] = {}
    for b in tracker.blockers(stage, time):
        node = b.location.node
        if isinstance(b.location, Source) and not graph.node(node).inputs:
            out += _source_holds(s, pipeline, b)
        elif isinstance(b.location, Target):
            waiting.setdefault((node, b.time), []).append(b)
        else:
            out.append(Hold(b, sentences.stage_holds(node, b.time)))
    failed = failures(s, pipeline) if failed is None else failed
    for (node, t), found in waiting.items():  # one line per stage, whatever its ports
        count = sum(b.count for b in found)
        if (node, t) in failed:
            text = failed[node, t].text
        elif node == stage:
            text = sentences.must_first_run(stage, t, count)
        else:
            text = sentences.stage_not_run(node, t, count)
        out.append(Hold(found[0], text))
    if (stage, time) in failed and (stage, time) not in waiting:  # ready, and its run failed
        own = Target(stage, 0)
        out.append(Hold(Blocker(own, time, 1, own, time), failed[stage, time].text))
    return out


def failures(s: Session, pipeline: str) -> dict[tuple[str, Time], Failure]:
    """The ``(stage, time)`` whose last run failed (no run of it has started since): the
    failure's sentence, and whether an input may have changed since (a send, a correction or
    a revision at that epoch or before was committed after the run started)."""
    rows = s.rows(
        """
        WITH last AS (
            SELECT run_id, stage, t0, t1, status, error, started_at FROM runs WHERE pipeline = ?
            QUALIFY row_number() OVER (PARTITION BY stage, t0, t1 ORDER BY started_at DESC) = 1
        ), stops AS (  -- the first of its expectations that stopped the run, as it was named
            SELECT run_id, expectation, rows_failing, rows_checked FROM checks
            WHERE pipeline = ? AND NOT committed AND action = ? AND rows_failing > 0
            QUALIFY row_number() OVER (PARTITION BY run_id ORDER BY rowid) = 1
        )
        SELECT l.stage, l.t0, l.t1, l.error, EXISTS (
            SELECT 1 FROM batches b
            WHERE b.pipeline = ? AND b.t0 <= l.t0 AND b.committed_at > l.started_at
            AND (b.origin IN ('send', 'correction') OR b.run_kind = 'revision')
        ), s.expectation, s.rows_failing, s.rows_checked
        FROM last l LEFT JOIN stops s USING (run_id) WHERE l.status = ?
        """,
        [pipeline, pipeline, STOPS_RUN, pipeline, RunStatus.FAILED.value],
    )
    out: dict[tuple[str, Time], Failure] = {}
    for stage, t0, t1, error, changed, stopped_by, failing, checked in rows:
        t = time_from_columns(t0, t1)
        if stopped_by is not None:
            text = sentences.failed_expectation(stage, t, stopped_by, failing, checked)
        else:
            text = sentences.failed_run(stage, t, error or "no cause recorded")
        out[stage, t] = Failure(t, text, bool(changed))
    return out


def _source_holds(s: Session, pipeline: str, b: Blocker) -> list[Hold]:
    """One hold per input worker of a source whose capability is the blocker ``b``."""
    node = b.location.node
    t0, t1 = time_to_columns(b.time)
    workers = [
        r[0]
        for r in s.rows(
            "SELECT worker FROM capabilities "
            "WHERE pipeline = ? AND node = ? AND t0 = ? AND t1 = ? ORDER BY worker",
            [pipeline, node, t0, t1],
        )
    ]
    if not workers:
        return [Hold(b, sentences.source_count_holds(node, b.count, b.time))]
    return [Hold(b, sentences.source_holds(node, [w], b.time), (w,)) for w in workers]


def source_output_holds(
    s: Session, pipeline: str, tracker: Tracker, source: str, time: Time
) -> list[Hold]:
    """The input workers of ``source`` that can still send at ``time`` or earlier: their
    capabilities keep its output there from being final."""
    at = Source(source, 0)
    return [
        hold
        for location, t, count in tracker.pointstamps()
        if location == at and less_equal(t, time)
        for hold in _source_holds(s, pipeline, Blocker(at, t, count, Target(source, 0), t))
    ]


def message(s: Session, pipeline: str, stage: str, port: int, time: Time) -> list[MessageRecord]:
    """The current messages committed at ``(stage, port, time)``: read once per hold of the
    file until this process writes at the port (``hold_cache``)."""
    t0, t1 = time_to_columns(time)
    at = s.cache.messages.setdefault((pipeline, stage, port), {})
    found = at.get((t0, t1))
    if found is None and _none_there(s, pipeline, stage, port, (t0, t1)):
        found = at[t0, t1] = ()
    if found is None:
        s.cache.misses += 1
        rows = s.rows(  # a few rows: sorted here, which costs DuckDB a third of the query
            f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE pipeline = ? AND stage = ? "
            "AND port = ? AND t0 = ? AND t1 = ? AND current",
            [pipeline, stage, port, t0, t1],
        )
        found = tuple(sorted((message_record(r) for r in rows), key=lambda m: m.batch_id))
        at[t0, t1] = found
    return list(found)


def read_messages(s: Session, pipeline: str, places: Sequence[tuple[str, int, Time]]) -> None:
    """Read the current messages at each ``(stage, port, time)`` of ``places`` that this hold
    has not read yet, in one query, for ``message`` to answer from (one query less per place
    after the first)."""
    missing: dict[tuple[str, int, int, int], list[MessageRecord]] = {}
    for stage, port, time in places:
        t0, t1 = time_to_columns(time)
        if (t0, t1) not in s.cache.messages.get((pipeline, stage, port), {}):
            missing[stage, port, t0, t1] = []
    if len(missing) < 2:  # ``message`` asks for one as cheaply
        return
    missing = {p: [] for p in missing if not _none_there(s, pipeline, p[0], p[1], (p[2], p[3]))}
    if not missing:
        return
    s.cache.misses += 1
    where = " OR ".join(["(stage = ? AND port = ? AND t0 = ? AND t1 = ?)"] * len(missing))
    rows = s.rows(
        f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE pipeline = ? AND current AND ({where})",
        [pipeline, *(v for place in missing for v in place)],
    )
    for r in rows:
        missing[r[0], r[1], r[2], r[3]].append(message_record(r))
    for (stage, port, t0, t1), found in missing.items():
        at = s.cache.messages.setdefault((pipeline, stage, port), {})
        at[t0, t1] = tuple(sorted(found, key=lambda m: m.batch_id))


def _none_there(s: Session, pipeline: str, stage: str, port: int, at: tuple[int, int]) -> bool:
    """Whether this hold knows, with no query of the place, that ``(stage, port)`` has no
    current message at ``at`` (its columns) but those it remembers (``HoldCache.past_newest``).
    The newest epoch of each port is read at the hold's second query of a place: a hold that
    asks for one place pays nothing for it."""
    cache = s.cache
    if pipeline not in cache.newest:
        if not cache.misses:
            return False
        cache.newest[pipeline] = {
            (stage, port): t0
            for stage, port, t0 in s.rows(
                "SELECT stage, port, max(t0) FROM messages WHERE pipeline = ? GROUP BY ALL",
                [pipeline],
            )
        }
    return cache.past_newest(pipeline, stage, port, at)


def messages(s: Session, pipeline: str, stage: str, port: int) -> list[MessageRecord]:
    """The current messages committed at ``(stage, port)``, at every time, in time order."""
    rows = s.rows(
        f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE pipeline = ? AND stage = ? AND port = ? "
        "AND current ORDER BY t0, t1, batch_id",
        [pipeline, stage, port],
    )
    return [message_record(r) for r in rows]


def latest_message(s: Session, pipeline: str, stage: str, port: int) -> MessageRecord | None:
    """The most recently committed current message of ``(stage, port)`` with data."""
    rows = s.rows(
        f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE pipeline = ? AND stage = ? AND port = ? "
        "AND current AND path IS NOT NULL ORDER BY batch_id DESC LIMIT 1",
        [pipeline, stage, port],
    )
    return message_record(rows[0]) if rows else None


def messages_as_of(
    s: Session, pipeline: str, stage: str, port: int, epoch: Time
) -> list[MessageRecord]:
    """The content of a dimension source's output at ``epoch``: per input worker, its current
    messages with data at the latest epoch ``<= epoch`` where it has any, in commit order.

    A message with data is one sent, even an empty frame; the empty messages that sealing
    announces have none, so they leave the worker's table as it was. A worker is the one its
    message's batch names. Several messages of one worker at one epoch are its table together.
    """
    if type(epoch) is not int:
        raise InvalidTimeError(epoch, "a dimension source's content is kept by epoch")
    rows = s.rows(
        f"""
        SELECT {MESSAGE_COLUMNS} FROM (
            SELECT m.*, b.worker FROM messages m
            JOIN batches b ON b.pipeline = m.pipeline AND b.batch_id = m.batch_id
            WHERE m.pipeline = ? AND m.stage = ? AND m.port = ? AND m.t1 = -1 AND m.t0 <= ?
                AND m.current AND m.path IS NOT NULL
        ) QUALIFY t0 = max(t0) OVER (PARTITION BY worker)
        ORDER BY batch_id
        """,
        [pipeline, stage, port, epoch],
    )
    return [message_record(r) for r in rows]


def worker_sent(
    s: Session, pipeline: str, node: str, worker: int, epoch: Time, *, sealed: bool = False
) -> bool:
    """Whether input worker ``worker`` of ``node`` has a current message with data at ``epoch``
    (one it sent or corrected), or, with ``sealed``, any current message there (one sealed
    empty too)."""
    t0, t1 = time_to_columns(epoch)
    data = "" if sealed else " AND m.path IS NOT NULL"
    rows = s.rows(
        "SELECT 1 FROM messages m JOIN batches b ON b.pipeline = m.pipeline "
        "AND b.batch_id = m.batch_id WHERE m.pipeline = ? AND m.stage = ? AND m.t0 = ? "
        f"AND m.t1 = ? AND m.current{data} AND b.worker = ? LIMIT 1",
        [pipeline, node, t0, t1, worker],
    )
    return bool(rows)


def live_paths(s: Session, pipeline: str) -> list[str]:
    """Every data path the pipeline may still read or is writing: current messages, and the
    attempts of runs whose process is alive."""
    paths = [
        r[0]
        for r in s.rows(
            "SELECT path FROM messages WHERE pipeline = ? AND current AND path IS NOT NULL",
            [pipeline],
        )
    ]
    running = s.rows(
        "SELECT attempt, pid FROM runs WHERE pipeline = ? AND status = ?",
        [pipeline, RunStatus.RUNNING.value],
    )
    return paths + [f"attempt={a}" for a, pid in running if a and alive(pid)]


def done_epochs(s: Session, pipeline: str, stage: str) -> list[Time]:
    """The times ``stage`` has run (committed a run batch for, not only revisions), in order."""
    rows = s.rows(
        "SELECT DISTINCT t0, t1 FROM batches WHERE pipeline = ? AND origin = 'stage' "
        "AND node = ? AND run_kind = ? ORDER BY t0, t1",
        [pipeline, stage, RunKind.RUN.value],
    )
    return [time_from_columns(t0, t1) for t0, t1 in rows]


def read_by(s: Session, pipeline: str, ref: MessageRef) -> list[tuple[str, Time]]:
    """The runs ``(stage, time)`` whose current output read the message ``ref``."""
    t0, t1 = time_to_columns(ref.time)
    rows = s.rows(
        """
        SELECT DISTINCT r.stage, r.t0, r.t1 FROM reads r
        JOIN messages o ON o.pipeline = r.pipeline AND o.stage = r.stage
            AND o.attempt = r.attempt AND o.current
        WHERE r.pipeline = ? AND r.input_stage = ? AND r.input_port = ? AND r.input_t0 = ?
            AND r.input_t1 = ? AND r.input_attempt = ?
        ORDER BY ALL
        """,
        [pipeline, ref.stage, ref.port, t0, t1, ref.attempt],
    )
    return [(stage, time_from_columns(r0, r1)) for stage, r0, r1 in rows]


def reads(s: Session, pipeline: str, stage: str, time: Time) -> list[MessageRef]:
    """The input messages (and their attempts) that the current output of the run
    ``(stage, time)`` read: its message-level lineage."""
    t0, t1 = time_to_columns(time)
    rows = s.rows(
        """
        SELECT DISTINCT r.input_stage, r.input_port, r.input_t0, r.input_t1, r.input_attempt
        FROM reads r JOIN messages o ON o.pipeline = r.pipeline AND o.stage = r.stage
            AND o.attempt = r.attempt AND o.current
        WHERE r.pipeline = ? AND r.stage = ? AND r.t0 = ? AND r.t1 = ?
        ORDER BY ALL
        """,
        [pipeline, stage, t0, t1],
    )
    return [MessageRef(st, p, time_from_columns(a, b), att) for st, p, a, b, att in rows]


def stale(s: Session, pipeline: str) -> list[tuple[str, Time]]:
    """Runs ``(stage, time)`` whose current output read an input attempt that has since been
    replaced: they must run again (a revision replaced what they read). None can be before the
    pipeline has a replaced message (known once per hold of the file: ``hold_cache``)."""
    replaced = s.cache.replaced.get(pipeline)
    if replaced is None:
        found = s.row(
            "SELECT EXISTS (SELECT 1 FROM messages WHERE pipeline = ? AND NOT current)",
            [pipeline],
        )
        replaced = bool(found and found[0])
        s.cache.replaced[pipeline] = replaced
    if not replaced:
        return []
    rows = s.rows(
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
    return [(stage, time_from_columns(t0, t1)) for stage, t0, t1 in rows]


def history(s: Session, pipeline: str, stage: str, time: Time) -> History:
    """Every batch, message attempt and run recorded for ``(stage, time)``."""
    t0, t1 = time_to_columns(time)
    s.graph(pipeline).node(stage)
    batches = s.rows(
        "SELECT batch_id, key, origin, node, worker, t0, t1, n_updates, committed_at "
        "FROM batches WHERE pipeline = ? AND node = ? AND ((t0 = ? AND t1 = ?) OR "
        "(origin IN ('send', 'input') AND batch_id IN (SELECT batch_id FROM messages WHERE "
        "pipeline = ? AND stage = ? AND t0 = ? AND t1 = ?))) ORDER BY batch_id",
        [pipeline, stage, t0, t1, pipeline, stage, t0, t1],
    )
    messages = s.rows(
        f"SELECT {MESSAGE_COLUMNS} FROM messages "
        "WHERE pipeline = ? AND stage = ? AND t0 = ? AND t1 = ? ORDER BY batch_id",
        [pipeline, stage, t0, t1],
    )
    runs = s.rows(
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
            BatchRecord(
                b, k, OriginKind(o), n, w, None if a is None else time_from_columns(a, c), u, at
            )
            for b, k, o, n, w, a, c, u, at in batches
        ),
        tuple(message_record(r) for r in messages),
        tuple(
            RunRecord(r, st, time_from_columns(a, c), att, RunStatus(status), pid, sa, fa, bid, err)
            for r, st, a, c, att, status, pid, sa, fa, bid, err in runs
        ),
    )


def status(s: Session, pipeline: str, snapshot: Tracker | None = None) -> list[StageStatus]:
    """Each stage's input frontier and epochs done, ready, running and waiting, with the
    blockers of the oldest waiting epoch; from ``snapshot`` if given, else the current counts."""
    snapshot = snapshot if snapshot is not None else tracker(s, pipeline)
    graph = snapshot.graph
    done: dict[str, list[Time]] = {}
    for node, t0, t1 in s.rows(
        "SELECT DISTINCT node, t0, t1 FROM batches WHERE pipeline = ? AND origin = 'stage' "
        "ORDER BY t0, t1",
        [pipeline],
    ):
        done.setdefault(node, []).append(time_from_columns(t0, t1))
    running: dict[str, list[Time]] = {}
    for node, t0, t1, pid in s.rows(
        "SELECT DISTINCT stage, t0, t1, pid FROM runs WHERE pipeline = ? AND status = ?",
        [pipeline, RunStatus.RUNNING.value],
    ):
        if alive(pid):
            running.setdefault(node, []).append(time_from_columns(t0, t1))
    pending: dict[str, set[Time]] = {}
    for location, t, _ in snapshot.pointstamps():
        if isinstance(location, Target):
            pending.setdefault(location.node, set()).add(t)
    stale_by_stage: dict[str, list[Time]] = {}
    for node, t in stale(s, pipeline):
        stale_by_stage.setdefault(node, []).append(t)
    workers: dict[str, list[tuple[int, Time | None]]] = {}
    for node, w, t0, t1 in s.rows(
        "SELECT node, worker, t0, t1 FROM capabilities WHERE pipeline = ? ORDER BY ALL",
        [pipeline],
    ):
        workers.setdefault(node, []).append((w, None if t0 is None else time_from_columns(t0, t1)))
    in_rounds = rounds(s, pipeline)
    last_failed = failures(s, pipeline)
    out: list[StageStatus] = []
    order = graph.depths()
    for name, spec in sorted(graph.nodes.items(), key=lambda kv: (order[kv[0]], kv[0])):
        frontier: set[Time] = set()
        for target in spec.targets():
            frontier.update(snapshot.frontier(target).elements)
        waiting_all = sorted(pending.get(name, ()))
        run_now = sorted(running.get(name, ()))
        ready = [t for t in waiting_all if snapshot.ready(name, t) and t not in run_now]
        waiting = [t for t in waiting_all if t not in ready and t not in run_now]
        held: tuple[Hold, ...] = ()
        if waiting:
            held = tuple(holds(s, pipeline, snapshot, name, waiting[0], failed=last_failed))
        failed = tuple(
            last_failed[stage, t]
            for stage, t in sorted(last_failed, key=lambda st: time_to_columns(st[1]))
            if stage == name
        )
        out.append(
            StageStatus(
                pipeline,
                name,
                spec.inputs == 0,
                tuple(sorted(frontier)),
                tuple(done.get(name, ())),  # in time order
                tuple(ready),
                tuple(run_now),
                tuple(waiting),
                held,
                tuple(stale_by_stage.get(name, ())),
                tuple(workers.get(name, ())),
                tuple(sorted(in_rounds.get(name, ()))),
                failed,
            )
        )
    return out


def rounds(s: Session, pipeline: str) -> dict[str, list[Time]]:
    """Per iterative stage of ``pipeline``, the ``Product(epoch, round)`` times waiting in its
    scope: rounds committed whose epoch has not reached its fixed point."""
    out: dict[str, list[Time]] = {}
    for (scope,) in s.rows(
        "SELECT pipeline FROM graphs WHERE starts_with(pipeline, ?)", [pipeline + "."]
    ):
        stage = scope.removeprefix(pipeline + ".")
        for location, t, _ in tracker(s, scope).pointstamps():
            if isinstance(location, Target):
                out.setdefault(stage, []).append(t)
    return out


def message_record(r: tuple[Any, ...]) -> MessageRecord:
    """A row of ``MESSAGE_COLUMNS`` as a record."""
    stage, port, t0, t1, attempt, path, rows, nbytes, batch_id, current = r
    return MessageRecord(
        stage, port, time_from_columns(t0, t1), attempt, path, rows, nbytes, batch_id, current
    )
