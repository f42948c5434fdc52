"""The ledger under several processes: no acknowledged commit lost, none half-committed."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import duckdb
import pytest

from progress import Target
from progress.ledger import Ledger
from tests.faults.recorder import full
from tests.progress.ledger.scenario import bank_graph
from tests.progress.ledger.worker import batch

pytestmark = [pytest.mark.ledger, pytest.mark.faults, pytest.mark.slow(57)]

REPO = Path(__file__).resolve().parents[3]


def spawn(path: Path, worker: int, commits: int, forever: bool = False) -> subprocess.Popen[str]:
    args = [
        sys.executable,
        "-m",
        "tests.progress.ledger.worker",
        str(path),
        str(worker),
        str(commits),
    ]
    return subprocess.Popen(
        [*args, "--forever"] if forever else args, cwd=REPO, stdout=subprocess.PIPE, text=True
    )


def expected_counts(acknowledged: list[str]) -> Counter[int]:
    counts: Counter[int] = Counter()
    for key in acknowledged:
        worker, n = (int(x) for x in key[1:].split(":"))
        for _, epoch, delta in batch(worker, n):
            counts[epoch] += delta
    return counts


def stored(path: Path) -> tuple[set[str], Counter[int], int]:
    """Committed keys, counts at ``validate``'s input, and catalogued messages, read from the
    tables directly (after folding the whole log into the counts table)."""
    Ledger(path, linger=0).compact()
    con = duckdb.connect(str(path), read_only=True)
    try:
        keys = {
            r[0] for r in con.execute("SELECT key FROM batches WHERE origin = 'system'").fetchall()
        }
        counts = Counter(
            dict(
                con.execute(
                    "SELECT t0, count FROM counts WHERE node = 'validate' AND kind = 1"
                ).fetchall()
            )
        )
        messages = con.execute("SELECT count(*) FROM messages").fetchone()[0]
    finally:
        con.close()
    return keys, counts, messages


COMMITS = 150 if full() else 60
"""Per writer (``FAULTS=full``: 150, the suite's short form: 60). Without the lock, 8 writers
lost several commits in every run of a few hundred."""


def test_eight_processes_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "ledger.duckdb"
    Ledger(path).register("bank", bank_graph())
    procs = [spawn(path, w, COMMITS) for w in range(8)]
    acknowledged: list[str] = []
    for p in procs:
        out, _ = p.communicate(timeout=600)
        assert p.returncode == 0
        acknowledged += out.split()
    assert len(acknowledged) == 8 * COMMITS
    keys, counts, messages = stored(path)
    assert keys == set(acknowledged)
    assert messages == 8 * COMMITS
    assert counts == expected_counts(acknowledged)
    report = Ledger(path).verify()
    assert report.ok, report.lines()


def test_killed_writers_leave_whole_batches(tmp_path: Path) -> None:
    path = tmp_path / "ledger.duckdb"
    Ledger(path).register("bank", bank_graph())
    rnd = random.Random(20261121)
    acknowledged: list[str] = []
    kills = 0
    round_ = 0
    # 50 kills at least, and on until 50 commits are acknowledged. Three kills in four are at a
    # random instant of the writer's life: during start-up, inside a transaction, between
    # commits (the point: the instant is random, not an event to wait for). The fourth is at a
    # random instant after the writer's first acknowledged commit, so kills land among commits
    # however slowly a loaded machine starts writers.
    while (kills < 50 or len(acknowledged) <= 50) and round_ < 200:
        round_ += 1
        proc = spawn(path, round_, 0, forever=True)
        first = ""
        if round_ % 4:
            time.sleep(rnd.uniform(0.15, 0.6))
        else:
            assert proc.stdout is not None
            first = proc.stdout.readline()
            time.sleep(rnd.uniform(0.0, 0.1))
        proc.send_signal(signal.SIGKILL)
        out, _ = proc.communicate()
        assert proc.returncode == -signal.SIGKILL
        kills += 1
        acknowledged += (first + out).split()
        ledger = Ledger(path, lock_timeout=30)
        report = ledger.verify()
        assert report.ok, report.lines()
    keys, counts, _ = stored(path)
    # Every acknowledged commit is there; a commit killed after it was durable but before the
    # acknowledgement was printed may be there too, and then wholly.
    assert set(acknowledged) <= keys
    assert counts == expected_counts(sorted(keys))
    assert kills >= 50
    assert len(acknowledged) > 50  # the kills did land among commits
    assert Ledger(path).tracker("bank").count(Target("validate"), 0) == counts[0]
