"""A process forked while its parent holds the ledger: one lingering on it lets it go at the
fork, the child waits for it like any other process and the parent loses none of its commits; a
child forked during a use on another thread never hangs on the parent's guard, and says why it
cannot attach the file rather than writing it from a stale copy."""

from __future__ import annotations

import multiprocessing
import os
import threading
from multiprocessing.queues import Queue
from pathlib import Path

import pytest

from progress.errors import DatabaseFileError
from progress.ledger import Ledger
from progress.ledger.engine import AttachedFile
from progress.ledger.lock import LedgerLock
from tests.lock_files import wait_free
from tests.progress.ledger.scenario import bank_graph
from tests.waiting import wait_until

pytestmark = pytest.mark.ledger

FORK = multiprocessing.get_context("fork")


def _register(ledger: Ledger, name: str) -> None:
    ledger.register(name, bank_graph())


def test_a_child_forked_while_the_parent_lingers_waits_for_the_file_and_loses_nothing(
    tmp_path: Path,
) -> None:
    path = tmp_path / "ledger.duckdb"
    ledger = Ledger(path, lock_timeout=60, linger=60)
    ledger.register("bank", bank_graph())  # attached and lingering, its commit in memory
    child = FORK.Process(target=_register, args=(ledger, "child"))
    child.start()
    for name in ("after_1", "after_2"):
        ledger.register(name, bank_graph())  # the parent goes on while the child waits
    child.join(60)
    assert child.exitcode == 0
    expected = ["after_1", "after_2", "bank", "child"]
    assert sorted(ledger.pipelines()) == expected
    ledger.release()
    assert wait_free(path)
    fresh = Ledger(path, linger=0)
    assert sorted(fresh.pipelines()) == expected
    assert fresh.verify().ok


def _insert(holder: AttachedFile, value: int, said: Queue[str]) -> None:
    try:
        with holder.open() as con:
            con.execute("INSERT INTO t VALUES (?)", [value])
        said.put("inserted")
    except DatabaseFileError as err:
        said.put(str(err))


@pytest.mark.parametrize("linger", [30.0, 0.0])
def test_a_child_forked_during_a_use_on_another_thread_says_why_it_cannot_attach(
    tmp_path: Path, linger: float
) -> None:
    holder = AttachedFile(tmp_path / "file.duckdb", 60, linger=linger)
    with holder.open() as con:
        con.execute("CREATE TABLE t (v INTEGER)")
    inside, leave = threading.Event(), threading.Event()

    def use() -> None:
        with holder.open() as con:
            con.execute("INSERT INTO t VALUES (1)")
            inside.set()
            leave.wait(60)

    thread = threading.Thread(target=use)
    thread.start()
    assert inside.wait(60)
    said: Queue[str] = FORK.Queue()
    child = FORK.Process(target=_insert, args=(holder, 2, said))  # the guard taken, attached
    child.start()
    leave.set()
    thread.join(60)
    child.join(60)
    if child.exitcode is None:
        child.kill()  # hung on the parent's guard
    assert child.exitcode == 0
    assert "forked while its parent had the file attached (in use)" in said.get(timeout=10)
    holder.release()
    with holder.open() as con:  # the parent's file as the parent left it
        assert con.execute("SELECT v FROM t").fetchall() == [(1,)]
    holder.release()
    # A child forked once the use is over attaches the file like any other process.
    child = FORK.Process(target=_insert, args=(holder, 3, said))
    child.start()
    child.join(60)
    assert said.get(timeout=10) == "inserted"
    with holder.open() as con:
        assert sorted(con.execute("SELECT v FROM t").fetchall()) == [(1,), (3,)]
    holder.release()


def _fork_in_a_transaction(ledger: Ledger, write: int) -> int:
    """Fork inside a transaction of ``ledger``; the child writes in it, leaves it (its COMMIT
    tried), tells ``write`` how that went and exits. The parent's pid of the child."""
    pid = -1
    try:
        with ledger._sessions.transaction() as s:
            pid = os.fork()
            if pid == 0:  # the child carries on in its parent's transaction
                s.con.execute("INSERT INTO meta VALUES ('forked', 'child')")
        said = "committed"
    except BaseException as err:
        if pid != 0:
            raise
        said = type(err).__name__
    if pid == 0:
        os.write(write, said.encode())
        os._exit(0)
    return pid


def test_a_child_forked_inside_a_transaction_cannot_commit_it_through_the_parents_copy(
    tmp_path: Path,
) -> None:
    ledger = Ledger(tmp_path / "ledger.duckdb", lock_timeout=60, linger=60)
    ledger.register("bank", bank_graph())
    read, write = os.pipe()
    pid = _fork_in_a_transaction(ledger, write)
    os.close(write)
    assert os.waitpid(pid, 0)[1] == 0
    assert os.read(read, 1000) == b"LedgerLockLostError"  # refused at its commit
    os.close(read)
    with ledger._sessions.session() as s:
        assert s.rows("SELECT value FROM meta WHERE key = 'forked'") == []
    assert ledger.verify().ok
    ledger.register("after", bank_graph())  # the parent goes on
    assert sorted(ledger.pipelines()) == ["after", "bank"]


def _copies(path: Path) -> int:
    """How many of this process's descriptors are open on ``path``."""
    found = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            found += os.readlink(f"/proc/self/fd/{fd}") == str(path)
        except OSError:
            continue
    return found


def test_a_child_forked_while_another_thread_waits_for_the_lock_keeps_no_copy_of_it(
    tmp_path: Path,
) -> None:
    """A copy of the waiting thread's descriptor in the child would hold the lock that thread
    then takes for as long as the child lives, its parent killed or not; a copy of its
    ``.want`` mark would tell every holder someone waits; and a copy of a held lock's, before
    its owner records it (a ledger attaching its file), would outlive the parent's hold."""
    path, want = tmp_path / "ledger.lock", tmp_path / "ledger.want"
    holder = LedgerLock(path, 5)
    holder.acquire()
    waiter = LedgerLock(path, 30, want=want)
    waiting = threading.Thread(target=waiter.acquire)
    waiting.start()
    wait_until(lambda: _copies(path) == 2 and _copies(want) == 1, 10, "the waiter's descriptors")
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report what it holds, and leave at once
        os.write(write, f"{_copies(path)} {_copies(want)}".encode())
        os._exit(0)
    os.close(write)
    said = os.read(read, 64).decode()
    os.close(read)
    os.waitpid(pid, 0)
    holder.release()
    waiting.join(10)
    assert not waiting.is_alive()
    assert said == "0 0"  # the holder's copy too: held from its acquire on, whoever owns it
    waiter.release()
