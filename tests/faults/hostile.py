"""The pipeline, inputs and oracle of the hostile-input campaign (``test_hostile*.py``).

``moves`` (one worker, keyed by ``id``) feeds ``per_name``, a partial aggregate keyed by text,
and ``per_id``, a full aggregate keyed by a long. The legal rows carry the names and ids an
attacker would try: quotes, SQL fragments, ``..`` and ``/``, unicode, the extreme longs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import types as T

from pipelines import Pipeline
from pipelines.run.runtime import Runtime
from tests.faults import invariants

MOVES = T.StructType(
    [
        T.StructField("id", T.LongType()),
        T.StructField("name", T.StringType()),
        T.StructField("cents", T.LongType()),
    ]
)
NAMES = [
    "o'brien",
    'say "hi"',
    "'; DROP TABLE messages; --",
    "x' OR '1'='1",
    "../../etc/passwd",
    "a/b",
    "zoë 🙂 名前",
    "",
]
LONGEST = 2**63 - 1
ROWS = [
    (LONGEST, NAMES[0], 5),
    (-(2**63), NAMES[1], -7),
    (3, NAMES[2], 11),
    (4, NAMES[3], 13),
    (5, NAMES[4], 17),
    (6, NAMES[5], 19),
    (7, NAMES[6], 23),
    (8, NAMES[7], 29),
    (9, NAMES[0], LONGEST - 5),
]
"""Epoch 0's rows: every name once, ``o'brien`` twice, summing to the largest long."""
REF = "tests.faults.hostile:pipeline"


def pipeline() -> Pipeline:
    p = Pipeline("hostile")
    moves = p.source("moves", schema=MOVES, key=["id"])
    p.aggregate(
        "per_name",
        moves,
        key=["name"],
        aggs={"cents": ("sum", "cents"), "n": ("count", None)},
        partial=True,
    )
    p.aggregate("per_id", moves, key=["id"], aggs={"cents": ("sum", "cents")})
    return p


def table(rows: list[tuple[Any, ...]]) -> pa.Table:
    return pa.table(
        {
            "id": pa.array([r[0] for r in rows], pa.int64()),
            "name": pa.array([r[1] for r in rows], pa.string()),
            "cents": pa.array([r[2] for r in rows], pa.int64()),
        }
    )


def write(path: Path, rows: list[tuple[Any, ...]]) -> Path:
    pq.write_table(table(rows), path)
    return path


def oracle(keyed_by: str, keys: list[Any]) -> list[dict[str, Any]]:
    """Plain DuckDB SQL over the raw rows: each asked key's aggregate, in the order asked."""
    con = duckdb.connect()
    con.execute("CREATE TABLE moves (id BIGINT, name VARCHAR, cents BIGINT)")
    con.executemany("INSERT INTO moves VALUES (?, ?, ?)", ROWS)
    out = []
    for key in keys:
        found = con.execute(
            f"SELECT sum(cents)::BIGINT, count(*) FROM moves WHERE {keyed_by} = ? "
            f"GROUP BY {keyed_by}",
            [key],
        ).fetchall()
        for cents, n in found:
            out.append(
                {"name": key, "cents": cents, "n": n}
                if keyed_by == "name"
                else {"id": key, "cents": cents}
            )
    return out


# -- nothing committed ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Committed:
    """What a refused input must leave as it was: the ledger's batches and messages, every
    frontier, and every attempt directory on disk (visible or not)."""

    batches: int
    messages: tuple[tuple[str, tuple[Any, ...]], ...]
    frontiers: invariants.Frontiers
    attempts: tuple[str, ...]


def committed(rt: Runtime) -> Committed:
    p = rt.pipeline.name
    return Committed(
        rt.ledger.verify(p).batches,
        tuple((s, tuple(rt.ledger.messages(p, s, 0))) for s in rt.pipeline.stages),
        invariants.frontiers(rt),
        tuple(sorted(str(d) for d in rt.store.root.rglob("attempt=*"))),
    )


def check_nothing_committed(
    tally: invariants.Tally, rt: Runtime, before: Committed, what: str
) -> None:
    """``ledger verify`` clean, nothing new in the ledger or on disk, no frontier moved, and
    nothing uncommitted visible (``invariants.check_visible``)."""
    after = committed(rt)
    tally.check(rt.ledger.verify(rt.pipeline.name).ok, f"{what}: ledger verify failed")
    tally.check(after.batches == before.batches, f"{what}: a batch was committed")
    tally.check(after.messages == before.messages, f"{what}: the messages changed")
    tally.check(after == before, f"{what}: {after.attempts} left beside {before.attempts}")
    invariants.check_frontiers(tally, before.frontiers, after.frontiers)
    invariants.check_visible(tally, rt)


def names_under(root: Path) -> set[str]:
    """Every file and directory name under ``root``, to show no hostile name became a path."""
    return {p.name for p in root.rglob("*")}
