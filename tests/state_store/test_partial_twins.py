"""The state store's partial materializations read the same as a full one, over many random
epochs, reads (as of any done epoch), evictions and budgets, with no Spark: the twin of
``tests/pipelines/reads/test_partial_twins.py`` that can afford many examples.

Both twins are ``KeyedState`` tables of one file, written as the stateful carry writes them: each
epoch a fold (the balance and net rows of each account it moved) staged and committed per
attempt; the partial one only for its present keys, its holes filled with their whole history
by ``PartialKeys.fill`` on a read, evicted by ``PartialKeys.evict``. Every read of the partial
twin must equal the full twin's and plain DuckDB SQL over the raw moves; its counters must count
what happened. ``HYPOTHESIS_EXAMPLES=N`` runs N examples instead of 25 (a long form, e.g. 2000).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from state_store import Key, KeyedState, PartialKeys
from state_store.keyed import ident

pytestmark = pytest.mark.ledger

EXAMPLES = int(os.environ.get("HYPOTHESIS_EXAMPLES", "25"))
"""Examples per run (about half a second each; the Spark twin runs a fiftieth, at least 4)."""
P = "twins"
KEY = ("account",)
ROWS = pa.schema([("account", pa.int64()), ("balance", pa.int64()), ("n", pa.int64())])
HISTORY = ROWS.append(pa.field("_epoch", pa.int64()))

Move = tuple[int, int, int]
"""(account, sign, amount)."""

moves = st.lists(
    st.tuples(st.integers(1, 6), st.sampled_from([1, -1]), st.integers(-9, 9)), max_size=6
)
keys = st.lists(st.integers(1, 7), min_size=1, max_size=4, unique=True)
actions = st.lists(
    st.one_of(
        st.tuples(st.just("epoch"), moves),
        st.tuples(st.just("read"), keys, st.integers(0, 3)),
        st.tuples(st.just("evict"), keys),
        st.tuples(st.just("budget"), st.integers(1, 4)),
    ),
    min_size=1,
    max_size=8,
)


class Twins:
    """A full and a partial fold over the same moves, in one state store file."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.state = KeyedState(root / "state.duckdb")
        self.keys = PartialKeys(self.state)
        self.raw: dict[int, list[Move]] = {}
        self.files = itertools.count()
        self.expected = {"hits": 0, "misses": 0, "upqueries": 0, "evictions": 0}

    def _file(self, table: pa.Table) -> str:
        path = self.root / f"{next(self.files)}.parquet"
        pq.write_table(table, path)
        return str(path)

    @property
    def last(self) -> int:
        return max(self.raw)

    def run(self, epoch: int, rows: Sequence[Move]) -> None:
        """One epoch of each twin, as the carry runs it: the partial one drops its holes."""
        self.raw[epoch] = list(rows)
        present = {k for (k,) in self.present()}
        for stage, kept in (("full", rows), ("partial", [m for m in rows if m[0] in present])):
            moved = sorted({m[0] for m in kept})
            old = {r["account"]: r for r in self.latest(stage, moved)}
            new = []
            for account in moved:
                mine = [m for m in kept if m[0] == account]
                before = old.get(account, {"balance": 0, "n": 0})
                new.append(
                    {
                        "account": account,
                        "balance": before["balance"] + sum(m[2] for m in mine),
                        "n": before["n"] + sum(m[1] for m in mine),
                    }
                )
            attempt = f"{stage}-{epoch}"
            self.state.stage(P, stage, epoch, attempt, self._file(pa.Table.from_pylist(new, ROWS)))
            self.state.commit(P, stage, KEY, attempt)

    def latest(self, stage: str, accounts: Sequence[int]) -> list[dict[str, Any]]:
        if not accounts:
            return []
        wanted = [(a,) for a in accounts]
        return self.keys.read(P, stage, KEY, wanted, None, partial=False, count=False).rows

    def present(self) -> list[Key]:
        read = self.keys.read(
            P, "partial", KEY, [(k,) for k in range(1, 8)], None, partial=True, count=False
        )
        return sorted(read.present)

    def history(self, accounts: Sequence[int]) -> pa.Table:
        """The fold's rows of ``accounts`` at every epoch that moved them: what an upquery
        re-derives from the raw moves."""
        out = []
        for account in accounts:
            balance = n = 0
            for epoch in sorted(self.raw):
                mine = [m for m in self.raw[epoch] if m[0] == account]
                if mine:
                    balance += sum(m[2] for m in mine)
                    n += sum(m[1] for m in mine)
                    row = {"account": account, "balance": balance, "n": n, "_epoch": epoch}
                    out.append(row)
        return pa.Table.from_pylist(out, HISTORY)

    def read(self, asked: Sequence[int], as_of: int) -> list[dict[str, Any]]:
        """A lookup of the partial twin: hits from state, holes filled with their history."""
        wanted = [(a,) for a in asked]
        first = self.keys.read(P, "partial", KEY, wanted, as_of, partial=True)
        holes = [a for a in asked if (a,) not in first.present]
        self.expected["hits"] += len(asked) - len(holes)
        rows = {r["account"]: r for r in first.rows}
        if holes:
            keys_file = self._file(pa.table({"account": pa.array(holes, pa.int64())}))
            filled = self.keys.fill(
                P,
                "partial",
                KEY,
                keys_file=keys_file,
                history_file=self._file(self.history(holes)),
                as_of=self.last,
            )
            assert filled == len(holes)
            self.keys.count_misses(P, "partial", len(holes))
            self.expected["misses"] += len(holes)
            self.expected["upqueries"] += 1
            again = self.keys.read(
                P, "partial", KEY, [(h,) for h in holes], as_of, partial=True, count=False
            )
            assert again.present == frozenset((h,) for h in holes)
            rows |= {r["account"]: r for r in again.rows}
        return [rows[a] for a in asked if a in rows]

    def table(self, stage: str, table: str, present: Sequence[Key]) -> list[tuple[Any, ...]]:
        """The rows of one of a twin's state tables whose key is in ``present``, sorted."""
        with self.state.connect() as con:
            if not self.state.exists(con, ident(P, stage, table)):
                return []
            rows = con.execute(
                f"SELECT account, balance, n, _epoch FROM {ident(P, stage, table)}"
            ).fetchall()
        return sorted(r for r in rows if (r[0],) in present)

    def evict(self, asked: Sequence[int] | None, budget: int | None = None) -> None:
        before = set(self.present())
        wanted = None if asked is None else [(a,) for a in asked]
        removed = self.keys.evict(P, ("partial",), KEY, wanted, max_keys=budget)
        assert set(removed) <= before
        if asked is not None:
            assert set(removed) == before & {(a,) for a in asked}
        else:
            assert len(before) - len(removed) == min(len(before), budget or 0)
        assert set(self.present()) == before - set(removed)
        self.expected["evictions"] += len(removed)


def oracle(raw: dict[int, list[Move]], asked: Sequence[int], as_of: int) -> list[dict[str, Any]]:
    """The fold's rows of ``asked`` after ``as_of``, in DuckDB SQL over the raw moves."""
    con = duckdb.connect()
    con.execute("CREATE TABLE raw (epoch BIGINT, account BIGINT, sign BIGINT, amount BIGINT)")
    rows = [(e, *m) for e, ms in raw.items() for m in ms]
    if rows:
        con.executemany("INSERT INTO raw VALUES (?, ?, ?, ?)", rows)
    found = con.execute(
        "SELECT account, sum(amount) AS balance, sum(sign) AS n FROM raw WHERE epoch <= ? "
        "GROUP BY account",
        [as_of],
    ).fetchall()
    by_key = {a: {"account": a, "balance": int(b), "n": int(n)} for a, b, n in found}
    return [by_key[a] for a in asked if a in by_key]


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(moves, actions)
def test_every_read_of_a_partial_state_equals_the_full_one(
    tmp_path_factory: pytest.TempPathFactory, first: list[Move], steps: list[tuple[Any, ...]]
) -> None:
    twins = Twins(tmp_path_factory.mktemp("twins"))
    twins.run(0, first)
    for step in steps:
        if step[0] == "epoch":
            twins.run(twins.last + 1, step[1])
        elif step[0] == "read":
            _, asked, back = step
            as_of = max(twins.last - back, 0)
            full = twins.keys.read(P, "full", KEY, [(a,) for a in asked], as_of, partial=False)
            got = twins.read(asked, as_of)
            assert got == sorted(full.rows, key=lambda r: asked.index(r["account"]))
            assert got == oracle(twins.raw, asked, as_of), (asked, as_of)
        elif step[0] == "evict":
            twins.evict(step[1])
        else:
            twins.evict(None, budget=step[1])
    # Holes hold nothing, history included; present keys hold what the full twin holds.
    present = twins.present()
    everything = [(k,) for k in range(1, 8)]
    for table in ("latest", "history"):
        held = twins.table("partial", table, everything)
        assert held == twins.table("full", table, present), table
    counts = twins.keys.counts(P, "partial", partial=True)
    assert (counts.present_keys, counts.rows) == (
        len(present),
        len(twins.table("partial", "latest", everything)),
    )
    everyone = list(range(1, 8))
    assert twins.read(everyone, twins.last) == oracle(twins.raw, everyone, twins.last)
    counts = twins.keys.counts(P, "partial", partial=True)
    assert (counts.hits, counts.misses, counts.upqueries, counts.evictions) == (
        twins.expected["hits"],
        twins.expected["misses"],
        twins.expected["upqueries"],
        twins.expected["evictions"],
    )
