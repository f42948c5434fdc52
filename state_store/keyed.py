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
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from progress.errors import EpochgateError, LedgerLockTimeoutError
from progress.ledger.engine import AttachedFile
from progress.ledger.lock import LedgerLock

DEFAULT_LOCK_TIMEOUT = 60.0
WRITER_TIMEOUT = 6 * 3600.0
"""Seconds a run of a stateful stage waits for another process's run of the same stage."""


class StateStoreError(EpochgateError):
    """A state store request that cannot be served."""


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


class KeyedState:
    """The keyed state of every stateful stage of the pipelines that share one file."""

    def __init__(self, path: str | os.PathLike[str], lock_timeout: float = DEFAULT_LOCK_TIMEOUT):
        self.path = Path(path)
        self._file = AttachedFile(self.path, lock_timeout)
        self._writing: dict[tuple[str, str], int] = {}
        self._created = False
        self._seen: set[str] = set()

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
        try:
            yield
        finally:
            self._writing.pop(held, None)
            lock.release()

    @contextmanager
    def connect(self) -> Iterator[Any]:
        """One transaction on the file (its tables of every stage created on first use)."""
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
                self._created = True
            con.execute("BEGIN TRANSACTION")
            try:
                yield con
            except BaseException:
                con.execute("ROLLBACK")
                raise
            con.execute("COMMIT")

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
            if not self.exists(con, latest):
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
            if not self.exists(con, history):
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
            if not self.exists(con, latest):
                con.execute(
                    f"CREATE TABLE {latest} AS SELECT * EXCLUDE (_attempt) FROM {history} LIMIT 0"
                )
            new = f"(SELECT * EXCLUDE (_attempt) FROM {history} WHERE _attempt = $attempt)"
            con.execute(
                f"DELETE FROM {latest} WHERE ({using}) IN (SELECT ({using}) FROM {new})",
                {"attempt": attempt},
            )
            con.execute(f"INSERT INTO {latest} SELECT * FROM {new}", {"attempt": attempt})
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

    def rewind(self, pipeline: str, stage: str, key: Sequence[str], epoch: int) -> None:
        """Make ``latest`` the state as of ``epoch - 1`` (before a revision from ``epoch``)."""
        history = ident(pipeline, stage, "history")
        latest = ident(pipeline, stage, "latest")
        partition = ", ".join(f'h."{k}"' for k in key)
        with self.connect() as con:
            if not self.exists(con, latest):
                return
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

    def reconcile(
        self, pipeline: str, stage: str, key: Sequence[str], committed: Callable[[int, str], bool]
    ) -> None:
        """After a crash: commit staged attempts the ledger committed; drop the others."""
        with self.connect() as con:
            pending = con.execute(
                "SELECT epoch, attempt FROM attempts "
                "WHERE pipeline = ? AND stage = ? AND NOT committed ORDER BY epoch",
                [pipeline, stage],
            ).fetchall()
        for epoch, attempt in pending:
            if committed(epoch, attempt):
                self.commit(pipeline, stage, key, attempt)
            else:
                self.abandon(pipeline, stage, attempt)

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
