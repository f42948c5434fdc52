"""The present keys of partial materializations, and the reads, fills and evictions of keys.

Per partial stage one more table beside ``history`` and ``latest``: ``present`` (its key columns,
when each was last read, and the epoch it was filled as of). A key not in it is a hole: its
rows are in neither ``history`` nor ``latest``. A fill adds a key's rows (every epoch of its
history up to the fill's epoch, each under the committed attempt of its epoch) and makes the
key present, in one transaction; an eviction deletes them and the key, in one transaction, in
a stage and the stages below it. ``stats`` counts what reads found: hits, misses, upqueries and
evictions, per stage.

Keys come as tuples in key-column order. Rows go out as dicts of the state's columns.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from progress import faults
from progress.faults import FaultPoint
from state_store.keyed import COUNTERS, KeyedState, add_counts, ident, parquet

Key = tuple[Any, ...]

INLINE_KEYS = 256
"""Up to this many keys, a read names them in its SQL; more go through a temporary table."""
SAMPLE_ROWS = 10_000
"""Rows sampled to estimate the bytes of a state table."""


@dataclass(frozen=True)
class StateRead:
    """What one read found: the rows of the keys that have one, the keys present (every key,
    for a full stage's read), and the last epoch the state holds (None before any)."""

    rows: list[dict[str, Any]]
    present: frozenset[Key]
    last_epoch: int | None


@dataclass(frozen=True)
class StateCounts:
    """The size of a stage's state and what its reads found."""

    present_keys: int
    rows: int
    bytes: int
    hits: int
    misses: int
    upqueries: int
    evictions: int


def _columns(key: Sequence[str], alias: str = "") -> str:
    prefix = f"{alias}." if alias else ""
    return ", ".join(f'{prefix}"{k}"' for k in key)


def _matches(key: Sequence[str], left: str, right: str) -> str:
    return " AND ".join(f'{left}."{k}" = {right}."{k}"' for k in key)


class PartialKeys:
    """Reads, fills and evictions of keys in the keyed state of one file (see module docs)."""

    def __init__(self, state: KeyedState) -> None:
        self.state = state

    @staticmethod
    def _count(con: Any, pipeline: str, stage: str, **counts: int) -> None:
        """Add to a stage's counters (``add_counts``); a fill or an eviction folds them into
        one row."""
        add_counts(con, pipeline, stage, [counts.get(name, 0) for name in COUNTERS])

    @staticmethod
    def _fold_counts(con: Any, pipeline: str, stage: str) -> None:
        """Fold a stage's counter rows into one."""
        sums = ", ".join(f"coalesce(sum({name}), 0)" for name in COUNTERS)
        row = con.execute(
            f"SELECT {sums} FROM partial_stats WHERE pipeline = ? AND stage = ?", [pipeline, stage]
        ).fetchall()[0]
        con.execute("DELETE FROM partial_stats WHERE pipeline = ? AND stage = ?", [pipeline, stage])
        add_counts(con, pipeline, stage, row)

    @staticmethod
    def _asked(con: Any, key: Sequence[str], keys: Sequence[Key]) -> str:
        """A temporary table ``asked`` of ``keys`` (columns named as the key); its name."""
        con.execute("DROP TABLE IF EXISTS temp.asked")
        cols = ", ".join(f'"{k}"' for k in key)
        if not keys:
            con.execute(
                f"CREATE TEMP TABLE asked AS SELECT * FROM "
                f"(SELECT {', '.join('NULL' for _ in key)}) t({cols}) LIMIT 0"
            )
            return "temp.asked"
        row = "(" + ", ".join("?" for _ in key) + ")"
        values = ", ".join(row for _ in keys)
        con.execute(
            f"CREATE TEMP TABLE asked AS SELECT * FROM (VALUES {values}) t({cols})",
            [v for k in keys for v in k],
        )
        return "temp.asked"

    @classmethod
    def _of(
        cls, con: Any, key: Sequence[str], keys: Sequence[Key], alias: str
    ) -> tuple[str, list[Any]]:
        """A condition on ``alias``'s rows: one of ``keys``. A few keys are inlined (no table
        to create: a read of one key stays cheap); many go through ``_asked``."""
        if not keys:
            return "false", []
        if len(keys) > INLINE_KEYS:
            asked = cls._asked(con, key, keys)
            return f"EXISTS (SELECT 1 FROM {asked} a WHERE {_matches(key, alias, 'a')})", []
        if len(key) == 1:
            marks = ", ".join("?" for _ in keys)
            return f'{alias}."{key[0]}" IN ({marks})', [k[0] for k in keys]
        one = "(" + " AND ".join(f'{alias}."{c}" = ?' for c in key) + ")"
        return "(" + " OR ".join(one for _ in keys) + ")", [v for k in keys for v in k]

    def read(
        self,
        pipeline: str,
        stage: str,
        key: Sequence[str],
        keys: Sequence[Key],
        as_of: int | None,
        *,
        partial: bool,
        count: bool = True,
        mark: bool = True,
    ) -> StateRead:
        """The rows of ``keys`` as of ``as_of`` (None: the last epoch), the keys present, and the
        last epoch, in one transaction; a read of a partial stage marks its present keys read
        now (with ``mark``: what a key budget evicts by) and (with ``count``) counts them as
        hits; both are put off (``KeyedState.count_later``, ``mark_later``), so a read writes
        nothing. An ``as_of`` past the last epoch (or no epoch at all) reads nothing: only the
        last epoch is returned."""
        history = ident(pipeline, stage, "history")
        latest = ident(pipeline, stage, "latest")
        present = ident(pipeline, stage, "present")
        with self.state.connect(reading=True) as con:
            last = self.state.remembered(
                ("last", pipeline, stage), lambda: KeyedState.last_epoch(con, pipeline, stage)
            )
            if (as_of is None and last is None) or (
                as_of is not None and last is not None and as_of > last
            ):
                return StateRead([], frozenset(), last)  # not answerable here: nothing marked
            found: frozenset[Key] = frozenset(keys)
            if partial:
                found = frozenset()
                if self.state.has(con, present):
                    where, params = self._of(con, key, keys, "p")
                    rows = con.execute(
                        f"SELECT {_columns(key, 'p')} FROM {present} p WHERE {where}", params
                    ).fetchall()
                    found = frozenset(tuple(r) for r in rows)
                    if mark and found:
                        self.state.mark_later(pipeline, stage, key, list(found))
                if count:
                    self.state.count_later(pipeline, stage, hits=len(found))
            elif count:
                self.state.count_later(pipeline, stage, hits=len(keys))
            out: list[dict[str, Any]] = []
            rewound = self.state.remembered(
                ("rewound", pipeline, stage), lambda: KeyedState.rewound(con, pipeline, stage)
            )  # a revision under way: ``latest`` is behind the last epoch
            as_of = last if as_of is None else as_of
            if as_of == last and not rewound:
                if self.state.has(con, latest):
                    where, params = self._of(con, key, keys, "l")
                    cursor = con.execute(
                        f"SELECT l.* EXCLUDE (_epoch) FROM {latest} l WHERE {where}", params
                    )
                    out = _dicts(cursor)
            elif self.state.has(con, history):
                where, params = self._of(con, key, keys, "h")
                cursor = con.execute(
                    f"SELECT * EXCLUDE (_epoch, _attempt, _rank) FROM (SELECT h.*, "
                    f"row_number() OVER (PARTITION BY {_columns(key, 'h')} "
                    "ORDER BY h._epoch DESC) AS _rank "
                    f"FROM {history} h "
                    "JOIN attempts t ON t.pipeline = ? AND t.stage = ? AND t.attempt = h._attempt "
                    f"AND t.committed AND NOT t.replaced WHERE h._epoch <= ? AND {where}) "
                    "WHERE _rank = 1",
                    [pipeline, stage, as_of, *params],
                )
                out = _dicts(cursor)
            if len(keys) > INLINE_KEYS:
                con.execute("DROP TABLE IF EXISTS temp.asked")
        return StateRead(out, found, last)

    def export_present(self, pipeline: str, stage: str, key: Sequence[str], out_file: str) -> int:
        """Write the present keys of ``stage`` to ``out_file`` (Parquet, the key columns);
        returns how many (0: none, and nothing written)."""
        present = ident(pipeline, stage, "present")
        with self.state.connect() as con:
            if not self.state.exists(con, present):
                return 0
            n = con.execute(f"SELECT count(*) FROM {present}").fetchall()[0][0]
            if n:
                con.sql(f"SELECT {_columns(key)} FROM {present}").write_parquet(out_file)
            return int(n)

    def fill(
        self,
        pipeline: str,
        stage: str,
        key: Sequence[str],
        *,
        keys_file: str,
        history_file: str | None,
        as_of: int,
    ) -> int:
        """Make the keys in ``keys_file`` present with the rows of ``history_file`` (the state's
        columns and ``_epoch``: the stage's rows for them at each epoch up to ``as_of``), in one
        transaction. A row's epoch is attributed to the committed attempt of that epoch (one
        the stage never ran, as for a stage added after it, gets an attempt of the fill's own).
        Keys present already are left as they are. Returns the keys made present."""
        history = ident(pipeline, stage, "history")
        latest = ident(pipeline, stage, "latest")
        present = ident(pipeline, stage, "present")
        fill_id = f"fill-{uuid.uuid4().hex[:12]}"
        with self.state.connect() as con:
            if not self.state.exists(con, present):
                con.execute(
                    f"CREATE TABLE {present} AS SELECT {_columns(key)}, 0::BIGINT AS _read, "
                    f"0::BIGINT AS _since FROM {parquet('?')} LIMIT 0",
                    [keys_file],
                )
            con.execute("DROP TABLE IF EXISTS temp.holes")
            con.execute(
                f"CREATE TEMP TABLE holes AS SELECT DISTINCT {_columns(key, 'k')} "
                f"FROM {parquet('?')} k ANTI JOIN {present} p ON {_matches(key, 'k', 'p')}",
                [keys_file],
            )
            holes = "temp.holes"
            if history_file is not None:
                rows = (
                    f"(SELECT f.* FROM {parquet(_literal(history_file))} f "
                    f"SEMI JOIN {holes} h ON {_matches(key, 'f', 'h')})"
                )
                if not self.state.exists(con, history):
                    con.execute(
                        f"CREATE TABLE {history} AS SELECT *, ''::VARCHAR AS _attempt "
                        f"FROM {rows} LIMIT 0"
                    )
                con.execute(
                    "INSERT INTO attempts SELECT DISTINCT ?, ?, r._epoch, ? || '-' || r._epoch, "
                    f"true, false FROM {rows} r WHERE NOT EXISTS (SELECT 1 FROM attempts a "
                    "WHERE a.pipeline = ? AND a.stage = ? AND a.epoch = r._epoch AND a.committed "
                    "AND NOT a.replaced)",
                    [pipeline, stage, fill_id, pipeline, stage],
                )
                con.execute(
                    f"INSERT INTO {history} BY NAME SELECT r.*, a.attempt AS _attempt "
                    f"FROM {rows} r JOIN attempts a ON a.pipeline = ? AND a.stage = ? "
                    "AND a.epoch = r._epoch AND a.committed AND NOT a.replaced",
                    [pipeline, stage],
                )
                if not self.state.exists(con, latest):
                    con.execute(
                        f"CREATE TABLE {latest} AS SELECT * EXCLUDE (_attempt) FROM {history} "
                        "LIMIT 0"
                    )
                con.execute(
                    f"INSERT INTO {latest} BY NAME SELECT * EXCLUDE (_rank) FROM (SELECT r.*, "
                    f"row_number() OVER (PARTITION BY {_columns(key, 'r')} ORDER BY r._epoch "
                    f"DESC) AS _rank FROM {rows} r) WHERE _rank = 1"
                )
            n = con.execute(f"SELECT count(*) FROM {holes}").fetchall()[0][0]
            con.execute(
                f"INSERT INTO {present} SELECT {_columns(key)}, ?, ? FROM {holes}",
                [time.time_ns() // 1000, as_of],
            )
            con.execute("DROP TABLE IF EXISTS temp.holes")
            if n:
                self._count(con, pipeline, stage, upqueries=1)
                self._fold_counts(con, pipeline, stage)
        return int(n)

    def count_misses(self, pipeline: str, stage: str, misses: int) -> None:
        """Count reads of holes (each filled by an upquery)."""
        with self.state.connect() as con:
            self._count(con, pipeline, stage, misses=misses)

    def evict(
        self,
        pipeline: str,
        stages: Sequence[str],
        key: Sequence[str],
        keys: Sequence[Key] | None = None,
        *,
        max_keys: int | None = None,
    ) -> list[Key]:
        """Turn keys of ``stages[0]`` into holes there and in the other ``stages`` (those below
        it), state and history included, in one transaction: the ``keys`` given, or (with
        ``max_keys``) the least recently read beyond that many. Returns the keys that were
        present in ``stages[0]``."""
        first = ident(pipeline, stages[0], "present")
        with self.state.connect() as con:
            if not self.state.exists(con, first):
                return []
            if keys is not None:
                asked = self._asked(con, key, keys)
                con.execute("DROP TABLE IF EXISTS temp.victims")
                con.execute(
                    f"CREATE TEMP TABLE victims AS SELECT {_columns(key, 'p')} FROM {first} p "
                    f"SEMI JOIN {asked} a ON {_matches(key, 'p', 'a')}"
                )
            else:
                con.execute("DROP TABLE IF EXISTS temp.victims")
                con.execute(
                    f"CREATE TEMP TABLE victims AS SELECT {_columns(key)} FROM {first} "
                    "ORDER BY _read DESC OFFSET ?",
                    [max_keys],
                )
            victims = [tuple(r) for r in con.execute("SELECT * FROM temp.victims").fetchall()]
            if victims:
                for stage in stages:
                    removed = 0
                    for table in ("present", "latest", "history"):
                        name = ident(pipeline, stage, table)
                        if not self.state.exists(con, name):
                            continue
                        if table == "present":
                            removed = con.execute(
                                f"SELECT count(*) FROM {name} p "
                                f"SEMI JOIN temp.victims v ON {_matches(key, 'p', 'v')}"
                            ).fetchall()[0][0]
                        con.execute(
                            f"DELETE FROM {name} t WHERE EXISTS (SELECT 1 FROM temp.victims v "
                            f"WHERE {_matches(key, 't', 'v')})"
                        )
                    if removed:
                        self._count(con, pipeline, stage, evictions=int(removed))
                    faults.reach(FaultPoint.EVICTION)  # inside the transaction: none is gone
            con.execute("DROP TABLE IF EXISTS temp.victims")
            con.execute("DROP TABLE IF EXISTS temp.asked")
        return victims

    def counts(self, pipeline: str, stage: str, *, partial: bool) -> StateCounts:
        """The size of ``stage``'s state and its counters (a full stage's keys are its rows)."""
        with self.state.connect() as con:
            sizes: dict[str, int] = {}
            nbytes = 0
            for table in ("present", "latest", "history"):
                name = ident(pipeline, stage, table)
                if not self.state.exists(con, name):
                    sizes[table] = 0
                    continue
                n = int(con.execute(f"SELECT count(*) FROM {name}").fetchall()[0][0])
                sizes[table] = n
                if n:
                    sample = con.sql(f"SELECT * FROM {name} LIMIT {SAMPLE_ROWS}").to_arrow_table()
                    nbytes += int(sample.nbytes * n / max(sample.num_rows, 1))
            sums = ", ".join(f"coalesce(sum({name}), 0)" for name in COUNTERS)
            row = con.execute(
                f"SELECT {sums} FROM partial_stats WHERE pipeline = ? AND stage = ?",
                [pipeline, stage],
            ).fetchall()
        hits, misses, upqueries, evictions = row[0]
        return StateCounts(
            present_keys=sizes["present"] if partial else sizes["latest"],
            rows=sizes["latest"],
            bytes=nbytes,
            hits=int(hits),
            misses=int(misses),
            upqueries=int(upqueries),
            evictions=int(evictions),
        )


def _literal(path: str) -> str:
    """A SQL string literal of ``path``."""
    return "'" + path.replace("'", "''") + "'"


def _dicts(cursor: Any) -> list[dict[str, Any]]:
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
