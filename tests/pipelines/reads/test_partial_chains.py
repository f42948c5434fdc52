"""Partial stages over other stages: two partial levels (a recursive upquery, also when the
lower one is behind), a union and a join below a partial stage, revisions that recompute only
present keys, and the key budget, which follows a key to the partial stages below.

Every expected row comes from ``Oracle`` (DuckDB SQL over the raw input files).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from pipelines.run.runtime import Runtime
from pipelines.testing import rows_of
from progress.ledger import Ledger
from tests.fixtures.partials import Raw, branch_pipeline, chain_pipeline, writes

pytestmark = pytest.mark.spark


def test_two_partial_levels_fill_recursively_from_a_union_even_when_the_lower_is_behind(
    tmp_path: Path, spark: SparkSession
) -> None:
    rt = Runtime(chain_pipeline(), Ledger(tmp_path / "ledger.duckdb"), spark, tmp_path / "data")
    raw = Raw(rt, tmp_path / "raw")
    raw.epochs("cards", {0: writes(0, 1, 2), 1: writes(1, 1), 2: [(1, 1, -500), (3, 1, 8)]})
    raw.epochs("wires", {0: writes(0, 1, 3, amount=40), 1: writes(1, 2, 3), 2: writes(2, 2)})
    for epoch in range(3):  # the upper stage runs; the lower one stays behind at no epoch
        rt.run_stage("moves", epoch)
        rt.run_stage("totals", epoch)
    assert rt.ledger.done_epochs("chain", "peaks") == []
    oracle = raw.oracle()
    read = rt.lookup("peaks", [1, 2, 3, 4])
    assert (read.upqueried, read.as_of) == ([1, 2, 3, 4], 2)
    assert read.rows == oracle.peaks(2, [1, 2, 3, 4])
    assert sorted(rt.ledger.done_epochs("chain", "peaks")) == [0, 1, 2]  # it caught up first
    above = rt.lookup("totals", [1, 2, 3])  # a key present below is present above
    assert (above.hits, above.rows) == ([1, 2, 3], oracle.totals(2, [1, 2, 3]))
    assert rt.evict("totals", [1, 2]) == [1, 2]
    assert (rt.state_info("totals").present_keys, rt.state_info("peaks").present_keys) == (2, 2)
    raw.epochs("cards", {3: [*writes(3, 1, 2, 3), (3, 1, 900)]})
    raw.epochs("wires", {3: [(2, -1, -202)]})
    rt.run()
    oracle = raw.oracle()
    again = rt.lookup("peaks", [1, 2, 3])
    assert (again.hits, again.upqueried) == ([3], [1, 2])
    assert again.rows == oracle.peaks(3, [1, 2, 3])
    assert rt.lookup("totals", [1, 2, 3]).rows == oracle.totals(3, [1, 2, 3])


def test_a_join_below_a_partial_stage_and_revisions_that_leave_holes_holes(
    tmp_path: Path, spark: SparkSession
) -> None:
    rt = Runtime(branch_pipeline(), Ledger(tmp_path / "ledger.duckdb"), spark, tmp_path / "data")
    raw = Raw(rt, tmp_path / "raw")
    raw.table("branches", 0, [(1, "north"), (2, "south"), (3, "north"), (4, "east")])
    raw.table("branches", 2, [(1, "south"), (2, "south"), (3, "north"), (4, "east")])
    rt.input("branches", 0).close()
    raw.epochs("moves", {0: writes(0, 1, 2, 4), 1: writes(1, 1, 3), 2: writes(2, 1, 2, 4)})
    rt.run()
    oracle = raw.oracle()
    read = rt.lookup("per_branch", ["north", "south", "west"])
    assert read.rows == oracle.per_branch(2, ["north", "south", "west"])
    assert read.upqueried == ["north", "south", "west"]
    assert rt.lookup("per_branch", ["north"], as_of=1).rows == oracle.per_branch(1, ["north"])
    assert rt.lookup("totals", [1, 2]).rows == oracle.totals(2, [1, 2])
    # a correction at epoch 1 and a backfill of epoch 0: present keys only are recomputed
    raw.correct("moves", 1, [*writes(1, 1, 3, 4), (2, 1, 55)])
    rt.run()
    rt.backfill("per_branch", [0])
    oracle = raw.oracle()
    for stage, keys in (("per_branch", ["north", "south", "west"]), ("totals", [1, 2])):
        info = rt.state_info(stage)
        assert info.present_keys == len(keys), stage  # holes stayed holes
        for epoch in range(3):
            shown = {r[0] for r in rows_of(rt, stage, epoch)}
            assert shown <= set(keys), (stage, epoch)  # nor are they in its output
    revised = rt.lookup("totals", [1, 2])
    assert (revised.hits, revised.rows) == ([1, 2], oracle.totals(2, [1, 2]))
    by_branch = rt.lookup("per_branch", ["north", "south", "east"])
    assert (by_branch.hits, by_branch.upqueried) == (["north", "south"], ["east"])
    assert by_branch.rows == oracle.per_branch(2, ["north", "south", "east"])
    holes = rt.lookup("totals", [3, 4], as_of=1)  # holes read after the revision: revised
    assert (holes.upqueried, holes.rows) == ([3, 4], oracle.totals(1, [3, 4]))


def test_a_key_budget_evicts_the_least_recently_read_here_and_below(
    tmp_path: Path, spark: SparkSession
) -> None:
    ledger = Ledger(tmp_path / "ledger.duckdb")
    rt = Runtime(chain_pipeline(budget=2), ledger, spark, tmp_path / "data")
    raw = Raw(rt, tmp_path / "raw")
    raw.epochs("cards", {0: writes(0, 1, 2, 3, 4), 1: writes(1, 1, 3)})
    raw.epochs("wires", {0: [], 1: writes(1, 2, 4)})
    rt.run()
    oracle = raw.oracle()
    for key in (1, 2, 3):  # reading 3 fills it, and the least recently read (1) leaves
        assert rt.lookup("totals", [key]).rows == oracle.totals(1, [key])
    info = rt.state_info("totals")
    assert (info.present_keys, info.evictions, info.max_keys) == (2, 1, 2)
    assert rt.lookup("totals", [2]).hits == [2]  # 2 is now read after 3
    assert rt.lookup("totals", [1]).upqueried == [1]  # so 3 leaves
    assert rt.lookup("totals", [2, 1]).hits == [2, 1]
    # a fill through the chain fills the bounded stage above too: its budget holds after it
    below = rt.lookup("peaks", [3, 4])
    assert (below.upqueried, below.rows) == ([3, 4], oracle.peaks(1, [3, 4]))
    assert rt.state_info("totals").present_keys == 2
    assert rt.lookup("totals", [3]).hits == [3]
    assert rt.lookup("totals", [4]).hits == [4]
    assert rt.lookup("totals", [1]).upqueried == [1]  # 3 leaves, here and below
    assert rt.state_info("peaks").present_keys == 1
    assert rt.lookup("peaks", [4]).hits == [4]
    # a lower budget takes effect at the next epoch run, here and below
    lower = Runtime(chain_pipeline(budget=1), ledger, spark, tmp_path / "data")
    raw.rt = lower
    raw.epochs("cards", {2: writes(2, 1, 4)})
    raw.epochs("wires", {2: writes(2, 2)})
    lower.run()
    oracle = raw.oracle()
    assert lower.state_info("totals").present_keys == 1
    kept = lower.lookup("totals", [1])  # 1 was read last there; 4 left, here and below
    assert (kept.hits, kept.rows) == ([1], oracle.totals(2, [1]))
    assert lower.state_info("peaks").present_keys == 0
    assert lower.lookup("peaks", [4]).rows == oracle.peaks(2, [4])
