"""Keyed state of stateful stages, with history by epoch, in a DuckDB file.

Per stage two tables: ``history`` (every state row a committed or pending attempt wrote, with
its epoch and attempt) and ``latest`` (one row per key: its newest committed value). A run
stages its rows under its attempt id; they become part of the state only when the ledger has
committed that attempt, which ``commit`` records and ``reconcile`` repairs after a crash
between the two. ``value_as_of`` reads any retained epoch; the carry from one epoch to the next
reads ``latest`` only, so its cost does not grow with history.

Because an epoch's run reads the state the previous epoch left, one run of a stateful stage
changes its state at a time, across processes: ``writer`` holds that right (an OS file lock
beside the store), so a backfill's revision and a sensor's run of the same stage never interleave.

Data comes and goes as Parquet files, so the engine computing the state (Spark) and this store
never share memory.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from progress.errors import LedgerLockTimeoutError, StateStoreError
from progress.ledger.engine import AttachedFile
from progress.ledger.lock import LedgerLock

DEFAULT_LOCK_TIMEOUT = 60.0
LINGER = 0.5
"""Seconds the file stays attached after a use, for the next use (``AttachedFile``): another
process that wants it waits a few ms at most, not this long."""
COUNTERS = ("hits", "misses", "upqueries", "evictions")
PutOff = tuple[
    dict[tuple[str, str], list[int]], dict[tuple[str, str, tuple[str, ...]], dict[Any, int]]
]
"""Counters and read marks that reads put off: per stage, and per stage and key columns."""
WRITER_TIMEOUT = 6 * 3600.0
"""Seconds a run of a stateful stage waits for another process's run of the same stage."""


def add_counts(con: Any, pipeline: str, stage: str, values: Sequence[int]) -> None:
    """Add ``values`` (one per ``COUNTERS``) to a stage's counters, in ``con``'s transaction:
    one row appended, none when every value is 0 (no index to keep: a hit stays cheap)."""
    if any(values):
        con.execute(
            "INSERT INTO partial_stats VALUES (?, ?, ?, ?, ?, ?)", [pipeline, stage, *values]
        )


def parquet(files: str) -> str:
    """SQL reading Parquet ``files`` (a parameter or a quoted literal) as they are: the
    ``key=value`` directories of the data plane are not columns."""
    return f"read_parquet({files}, hive_partitioning = false)"


def ident(*parts: str) -> str:
    """A quoted table name from identifiers (pipeline and stage names are validated as such)."""
    name = "__".join(parts)
    if not name.replace("__", "_").isidentifier():
        raise StateStoreError(f"not a valid state table name: {name!r}")
    return f'"{name}"'


PENDING = (
    "SELECT epoch, attempt FROM attempts "
    "WHERE pipeline = ? AND stage = ? AND NOT committed ORDER BY epoch"
)
"""A stage's staged attempts not committed yet, oldest first."""
LAST_EPOCH = (
    "SELECT max(epoch) FROM attempts WHERE pipeline = ? AND stage = ? AND committed "
    "AND NOT attempt LIKE 'fill-%'"
)
"""The last epoch a stage's state holds: its last committed attempt's (a fill's is not an
epoch's)."""


class KeyedState:
    """The keyed state of every stateful stage of the pipelines that share one file."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
        linger: float = LINGER,
    ):
        self.path = Path(path)
        self._file = AttachedFile(
            self.path,
            lock_timeout,
            linger=linger,
            on_release=self._settle,
            on_fork=self._forked,
            marks_waits=True,
            label="state store",
        )
        self._writing: dict[tuple[str, str], int] = {}
        self._writer_locks: dict[tuple[str, str], LedgerLock] = {}
        self._created = False
        self._seen: set[str] = set()
        self._memo: dict[Any, Any] = {}
        self._memo_hold = -1
        self._counts: dict[tuple[str, str], list[int]] = {}
        self._marks: dict[tuple[str, str, tuple[str, ...]], dict[tuple[Any, ...], int]] = {}

    def writer_lock_path(self, pipeline: str, stage: str) -> Path:
        """The lock file that ``writer`` holds for one stage."""
        return self.path.with_name(f"{self.path.name}.{pipeline}.{stage}.lock")

    @contextmanager
    def writer(self, pipeline: str, stage: str, timeout: float = WRITER_TIMEOUT) -> Iterator[None]:
        """Hold the right to change ``stage``'s state, waiting for another process that holds
        it. Nested holds by this object (a revision that runs epochs) take it once."""
        held = (pipeline, stage)
        if self._writing.get(held):
            self._writing[held] += 1
            try:
                yield
            finally:
                self._writing[held] -= 1
            return
        lock = LedgerLock(self.writer_lock_path(pipeline, stage), timeout)
        try:
            lock.acquire()
        except LedgerLockTimeoutError as err:
            holder = f"process {err.holder_pid}" if err.holder_pid else "another process"
            raise StateStoreError(
                f"stateful stage {stage!r} of {pipeline}: {holder} has been changing its state "
                f"for over {err.waited:.0f}s (one run of a stateful stage at a time)"
            ) from err
        self._writing[held] = 1
        self._writer_locks[held] = lock
        try:
            yield
        finally:
            self._writing.pop(held, None)
            self._writer_locks.pop(held, None)
            lock.release()

    @contextmanager
    def connect(self, *, reading: bool = False) -> Iterator[Any]:
        """One transaction on the file (its tables of every stage created on first use). It
        first writes the counters and read marks put off by reads (``count_later``,
        ``mark_later``), unless it is itself such a read (``reading``): whatever reads or
        changes them then sees them exact."""
        with self._file.open() as con:
            if not self._created:
                con.execute(
                    "CREATE TABLE IF NOT EXISTS attempts (pipeline VARCHAR, stage VARCHAR, "
                    "epoch BIGINT, attempt VARCHAR, committed BOOLEAN, replaced BOOLEAN, "
                    "PRIMARY KEY (pipeline, stage, attempt))"
                )
                con.execute(
                    "CREATE TABLE IF NOT EXISTS partial_stats (pipeline VARCHAR, stage VARCHAR, "
                    "hits BIGINT, misses BIGINT, upqueries BIGINT, evictions BIGINT)"
                )
                con.execute(
                    "CREATE TABLE IF NOT EXISTS rewinds (pipeline VARCHAR, stage VARCHAR, "
                    "PRIMARY KEY (pipeline, stage))"
                )
                self._created = True
            if not reading or self._memo_hold != self._file.holds:
                self._memo.clear()  # this hold may see others' changes; this one may change
                self._memo_hold = self._file.holds
            con.execute("BEGIN TRANSACTION")
            taken: PutOff | None = None
            try:
                if not reading:
                    taken = self._write_put_off(con)
                yield con
                self._file.check_intact()  # never under a lost lock, nor a forked child's copy
            except BaseException:
                con.execute("ROLLBACK")
                if taken is not None:
                    self._put_back(taken)
                raise
            con.execute("COMMIT")

    def remembered(self, key: Any, compute: Callable[[], Any]) -> Any:
        """``compute()``, remembered by ``key`` across reads (``connect(reading=True)``) of one
        hold of the file, until a transaction that may change it: within one hold no other
        holder changes the file. Call it inside a transaction."""
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    def release(self) -> None:
        """Write what reads put off and let the file go now (it lingers otherwise)."""
        self._file.release()

    def count_later(self, pipeline: str, stage: str, **counts: int) -> None:
        """Add to a stage's counters (``COUNTERS``) with the next transaction that is not a
        read, or before the file is let go: a hit writes nothing."""
        pending = self._counts.setdefault((pipeline, stage), [0] * len(COUNTERS))
        for i, name in enumerate(COUNTERS):
            pending[i] += counts.get(name, 0)

    def mark_later(
        self, pipeline: str, stage: str, key: Sequence[str], keys: Sequence[tuple[Any, ...]]
    ) -> None:
        """Mark present ``keys`` of a partial stage read now (what a key budget evicts by),
        written as ``count_later`` writes counters."""
        now = time.time_ns() // 1000
        marks = self._marks.setdefault((pipeline, stage, tuple(key)), {})
        for k in keys:
            marks[k] = now

    def _forked(self) -> None:
        """In a forked child, at the fork: what the parent put off is the parent's to write,
        and no writer lock of the parent's is the child's."""
        self._counts, self._marks = {}, {}
        self._memo, self._memo_hold = {}, -1
        for lock in self._writer_locks.values():
            lock.forget()
        self._writing, self._writer_locks = {}, {}

    def _settle(self, con: Any) -> None:
        """Before the file is let go: write what reads put off, in a transaction of its own."""
        if not self._counts and not self._marks:
            return
        taken = (self._counts, self._marks)
        con.execute("BEGIN TRANSACTION")
        try:
            self._write_put_off(con)
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            self._put_back(taken)
            raise

    def _put_back(self, taken: PutOff) -> None:
        """What a rolled back transaction took to write, put off again."""
        counts, marks = taken
        for (pipeline, stage), values in counts.items():
            self.count_later(pipeline, stage, **dict(zip(COUNTERS, values, strict=True)))
        for where, read in marks.items():
            newer = self._marks.setdefault(where, {})
            for k, when in read.items():
                newer[k] = max(when, newer.get(k, when))

    def _write_put_off(self, con: Any) -> PutOff:
        """Write the put-off counters and marks in ``con``'s transaction; returns them."""
        counts, self._counts = self._counts, {}
        marks, self._marks = self._marks, {}
        for (pipeline, stage), values in counts.items():
            add_counts(con, pipeline, stage, values)
        for (pipeline, stage, key), read in marks.items():
            present = ident(pipeline, stage, "present")
            if not read or not self.exists(con, present):
                continue
            cols = ", ".join(f'"{k}"' for k in key)
            row = "(" + ", ".join("?" for _ in range(len(key) + 1)) + ")"
            match = " AND ".join(f'p."{k}" = m."{k}"' for k in key)
            con.execute(
                f"UPDATE {present} p SET _read = greatest(p._read, m._read) FROM (VALUES "
                f"{', '.join(row for _ in read)}) m({cols}, _read) WHERE {match}",
                [v for k, when in read.items() for v in (*k, when)],
            )
        return counts, marks

    def has(self, con: Any, table: str) -> bool:
        """Whether ``table`` exists, remembered once it does (no table of the store is ever
        dropped): a read of a few keys asks the catalog only until then."""
        if table not in self._seen and self.exists(con, table):
            self._seen.add(table)
        return table in self._seen

    @staticmethod
    def exists(con: Any, table: str) -> bool:
        name = table.strip('"')
        # fetchall: a partly fetched result blocks the relation API on this connection.
        rows = con.execute(
            "SELECT count(*) FROM duckdb_tables() "
            "WHERE database_name = current_database() AND table_name = ?",
            [name],
        ).fetchall()
        return bool(rows[0][0])

    def export_latest(
        self,
        pipeline: str,
        stage: str,
        key: Sequence[str],
        keys_file: str | Sequence[str],
        out_file: str,
    ) -> bool:
        """Write the latest committed rows of the keys found in ``keys_file`` (Parquet files or
        globs with the key columns among theirs) to ``out_file``. Returns False when the stage
        has no state yet (nothing written)."""
        latest = ident(pipeline, stage, "latest")
        with self.connect() as con:
            if not self.has(con, latest):
                return False
            using = ", ".join(f'"{k}"' for k in key)
            con.sql(
                f"SELECT l.* EXCLUDE (_epoch) FROM {latest} l "
                f"SEMI JOIN {parquet('$keys')} k USING ({using})",
                params={"keys": keys_file if isinstance(keys_file, str) else list(keys_file)},
            ).write_parquet(out_file)
        return True

    def stage(self, pipeline: str, stage: str, epoch: int, attempt: str, rows_file: str) -> None:
        """Record an attempt's new state rows for ``epoch``, not yet part of the state."""
        history = ident(pipeline, stage, "history")
        with self.connect() as con:
            if not self.has(con, history):
                con.execute(
                    f"CREATE TABLE {history} AS SELECT *, 0::BIGINT AS _epoch, "
                    f"''::VARCHAR AS _attempt FROM {parquet('?')} LIMIT 0",
                    [rows_file],
                )
            con.execute(
                f"INSERT INTO {history} SELECT *, ?, ? FROM {parquet('?')}",
                [epoch, attempt, rows_file],
            )
            con.execute(
                "INSERT OR REPLACE INTO attempts VALUES (?, ?, ?, ?, false, false)",
                [pipeline, stage, epoch, attempt],
            )

    def commit(self, pipeline: str, stage: str, key: Sequence[str], attempt: str) -> None:
        """Make a staged attempt part of the state: its rows become the keys' latest values."""
        history = ident(pipeline, stage, "history")
        latest = ident(pipeline, stage, "latest")
        using = ", ".join(f'"{k}"' for k in key)
        with self.connect() as con:
            rows = con.execute(
                "SELECT committed, epoch FROM attempts "
                "WHERE pipeline = ? AND stage = ? AND attempt = ?",
                [pipeline, stage, attempt],
            ).fetchall()
            if not rows:
                raise StateStoreError(f"{pipeline}.{stage}: attempt {attempt!r} was never staged")
            if rows[0][0]:
                return
            if not self.has(con, latest):
                con.execute(
                    f"CREATE TABLE {latest} AS SELECT * EXCLUDE (_attempt) FROM {history} LIMIT 0"
                )
            # By epoch too: history is appended epoch by epoch, so its zone maps skip the
            # row groups of other epochs (a scan by attempt alone grows with the history).
            new = (
                f"(SELECT * EXCLUDE (_attempt) FROM {history} "
                "WHERE _epoch = $epoch AND _attempt = $attempt)"
            )
            at = {"attempt": attempt, "epoch": rows[0][1]}
            old = f"SELECT ({using}) FROM {new}"
            con.execute(f"DELETE FROM {latest} WHERE ({using}) IN ({old})", at)
            con.execute(f"INSERT INTO {latest} SELECT * FROM {new}", at)
            con.execute(
                "UPDATE attempts SET replaced = true WHERE pipeline = ? AND stage = ? "
                "AND epoch = ? AND committed AND attempt <> ?",
                [pipeline, stage, rows[0][1], attempt],
            )
            con.execute(
                "UPDATE attempts SET committed = true "
                "WHERE pipeline = ? AND stage = ? AND attempt = ?",
                [pipeline, stage, attempt],
            )
            con.execute(  # a revision's commits have brought ``latest`` back to the last epoch
                f"DELETE FROM rewinds WHERE pipeline = ? AND stage = ? AND ? >= ({LAST_EPOCH})",
                [pipeline, stage, rows[0][1], pipeline, stage],
            )

    def rewind(self, pipeline: str, stage: str, key: Sequence[str], epoch: int) -> None:
        """Make ``latest`` the state as of ``epoch - 1`` (before a revision from ``epoch``). Until
        the revision's commits bring it back to the last epoch, the stage is ``rewound``: reads
        take its state from ``history``, and a run that is not a revision ``restore``s it first
        (a revision stopped before it caught up leaves it so)."""
        with self.connect() as con:
            if self._rebuild(con, pipeline, stage, key, epoch):
                con.execute("INSERT OR REPLACE INTO rewinds VALUES (?, ?)", [pipeline, stage])

    def restore(self, pipeline: str, stage: str, key: Sequence[str]) -> bool:
        """Make ``latest`` the state as of the last epoch again, when a revision stopped before
        its commits did (``rewind``); whether it had to. Every run looks: a read first, a
        write only when there is something to restore."""
        with self.connect(reading=True) as con:
            if not self.rewound(con, pipeline, stage):
                return False
        with self.connect() as con:
            if not self.rewound(con, pipeline, stage):
                return False
            last = self.last_epoch(con, pipeline, stage)
            self._rebuild(con, pipeline, stage, key, -1 if last is None else last + 1)
            con.execute("DELETE FROM rewinds WHERE pipeline = ? AND stage = ?", [pipeline, stage])
            return True

    @staticmethod
    def rewound(con: Any, pipeline: str, stage: str) -> bool:
        """Whether ``latest`` is behind the last epoch, rewound for a revision (in a
        transaction)."""
        found = con.execute(
            "SELECT 1 FROM rewinds WHERE pipeline = ? AND stage = ?", [pipeline, stage]
        ).fetchall()
        return bool(found)

    @staticmethod
    def last_epoch(con: Any, pipeline: str, stage: str) -> int | None:
        """The last epoch the stage's state holds (a fill's attempt is not an epoch's)."""
        row = con.execute(LAST_EPOCH, [pipeline, stage]).fetchall()
        return None if row[0][0] is None else int(row[0][0])

    def _rebuild(self, con: Any, pipeline: str, stage: str, key: Sequence[str], epoch: int) -> bool:
        """``latest`` made the state as of ``epoch - 1`` from ``history``; False when the stage
        has no ``latest`` yet."""
        history = ident(pipeline, stage, "history")
        latest = ident(pipeline, stage, "latest")
        if not self.exists(con, latest):
            return False
        partition = ", ".join(f'h."{k}"' for k in key)
        con.execute(f"DELETE FROM {latest}")
        con.execute(
            f"INSERT INTO {latest} SELECT * EXCLUDE (_attempt, _rank) FROM ("
            f"SELECT h.*, row_number() OVER (PARTITION BY {partition} "
            "ORDER BY h._epoch DESC) AS _rank "
            f"FROM {history} h JOIN attempts a ON a.pipeline = ? AND a.stage = ? "
            "AND a.attempt = h._attempt AND a.committed AND NOT a.replaced "
            "WHERE h._epoch < ?) WHERE _rank = 1",
            [pipeline, stage, epoch],
        )
        return True

    def reconcile(
        self, pipeline: str, stage: str, key: Sequence[str], committed: Callable[[int, str], bool]
    ) -> None:
        """After a crash: commit staged attempts the ledger committed; drop the others."""
        with self.connect() as con:
            pending = con.execute(PENDING, [pipeline, stage]).fetchall()
        for epoch, attempt in pending:
            if committed(epoch, attempt):
                self.commit(pipeline, stage, key, attempt)
            else:
                self.abandon(pipeline, stage, attempt)

    def before_run(
        self,
        pipeline: str,
        stage: str,
        key: Sequence[str],
        committed: Callable[[int, str], bool],
        *,
        restore: bool,
    ) -> None:
        """Before a run of ``stage``, its writer lock held: ``reconcile``, then, with
        ``restore``, ``restore``; one read of the store when neither has anything to do (every
        run but the first after a crash or a revision stopped before it caught up)."""
        with self.connect(reading=True) as con:
            pending = con.execute(PENDING, [pipeline, stage]).fetchall()
            rewound = restore and self.rewound(con, pipeline, stage)
        if pending:
            self.reconcile(pipeline, stage, key, committed)
        if rewound:
            self.restore(pipeline, stage, key)

    def settle_committed(
        self, pipeline: str, stage: str, key: Sequence[str], committed: Callable[[int, str], bool]
    ) -> int:
        """Before a read: commit the staged attempts the ledger committed (a run killed after
        its ledger commit, before its state's), and leave the others (a run may be writing
        them; ``reconcile`` drops them under the writer lock). Returns how many it committed;
        with none staged, it costs one read of the attempts table."""
        with self.connect(reading=True) as con:
            pending = con.execute(PENDING, [pipeline, stage]).fetchall()
        found = [attempt for epoch, attempt in pending if committed(epoch, attempt)]
        for attempt in found:
            self.commit(pipeline, stage, key, attempt)
        return len(found)

    def abandon(self, pipeline: str, stage: str, attempt: str) -> None:
        """Forget a staged attempt that will never be committed."""
        history = ident(pipeline, stage, "history")
        with self.connect() as con:
            if self.exists(con, history):
                con.execute(f"DELETE FROM {history} WHERE _attempt = ?", [attempt])
            con.execute(
                "DELETE FROM attempts WHERE pipeline = ? AND stage = ? AND attempt = ?",
                [pipeline, stage, attempt],
            )

    def value_as_of(
        self, pipeline: str, stage: str, key: dict[str, Any], epoch: int
    ) -> dict[str, Any] | None:
        """The value of one key as of ``epoch`` (its newest committed row at or before it)."""
        history = ident(pipeline, stage, "history")
        where = " AND ".join(f'h."{k}" = $key_{i}' for i, k in enumerate(key))
        with self.connect() as con:
            if not self.exists(con, history):
                return None
            cursor = con.execute(
                f"SELECT h.* EXCLUDE (_attempt) FROM {history} h JOIN attempts a "
                "ON a.pipeline = $pipeline AND a.stage = $stage AND a.attempt = h._attempt "
                f"AND a.committed AND NOT a.replaced WHERE {where} AND h._epoch <= $epoch "
                "ORDER BY h._epoch DESC LIMIT 1",
                {
                    **{f"key_{i}": v for i, v in enumerate(key.values())},
                    "pipeline": pipeline,
                    "stage": stage,
                    "epoch": epoch,
                },
            )
            row = cursor.fetchone()
            if row is None:
                return None
            return dict(zip([d[0] for d in cursor.description], row, strict=True))
