"""A ledger kept attached between sessions: calls in a row open it once, another process gets
it within milliseconds and sees every commit, an exiting process lets it go first, and a
lingering holder sleeps until a waiter marks the file."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from progress.ledger import Ledger, engine
from progress.ledger.engine import IDLE_LOOK
from progress.ledger.lock import mark, unmark
from progress.ledger.want_watch import WantWatch
from tests.lock_files import free, wait_free
from tests.progress.ledger.scenario import bank_graph
from tests.waiting import wait_until

pytestmark = pytest.mark.ledger

REPO = Path(__file__).resolve().parents[3]


def python(code: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": path},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=True,
    )


def registered(tmp_path: Path, linger: float) -> tuple[Path, Ledger]:
    """A ledger file with ``bank`` registered, and a ``Ledger`` of it lingering ``linger``."""
    path = tmp_path / "ledger.duckdb"
    ledger = Ledger(path, linger=linger)
    ledger.register("bank", bank_graph())
    return path, ledger


def test_sessions_in_a_row_attach_once_and_the_file_is_let_go_after_the_linger(
    tmp_path: Path,
) -> None:
    path, ledger = registered(tmp_path, 2.0)  # no pause of a loaded machine lets it go early
    holds = ledger._sessions._file.holds
    for _ in range(5):
        ledger.pipelines()
    assert ledger._sessions._file.holds == holds  # no new attach: it stayed attached
    assert not free(path)
    assert wait_free(path)  # let go after the linger, without a call
    ledger.release()  # nothing held: nothing to do
    eager = Ledger(path, linger=0)
    eager.pipelines()
    assert free(path)


def test_another_process_gets_a_lingering_ledger_at_once_and_sees_every_commit(
    tmp_path: Path,
) -> None:
    path, ledger = registered(tmp_path, 60)
    assert not free(path)
    started = time.monotonic()
    found = python(
        "from progress.ledger import Ledger; import sys; "
        f"print(Ledger({str(path)!r}, lock_timeout=30, linger=0).pipelines())"
    )
    assert found.stdout.split() == ["['bank']"]
    assert time.monotonic() - started < 30  # not the 60 s of the linger
    ledger.register("other", bank_graph())  # attached again, with what the other saw
    assert ledger.pipelines() == ["bank", "other"]


def test_an_exiting_process_lets_its_ledger_go_first_and_does_not_wait_for_the_linger(
    tmp_path: Path,
) -> None:
    path = tmp_path / "ledger.duckdb"
    started = time.monotonic()
    python(
        "from progress.ledger import Ledger; "
        "from tests.progress.ledger.scenario import bank_graph; "
        f"Ledger({str(path)!r}, linger=60).register('bank', bank_graph())"
    )
    assert time.monotonic() - started < 30
    assert free(path)
    assert Ledger(path, linger=0).pipelines() == ["bank"]


def looked(ledger: Ledger) -> bool:
    """Whether the lingering holder of ``ledger`` has looked for a waiter (its first look opens
    the ``.want`` file and keeps it open)."""
    return ledger._sessions._file._want_fd is not None


def linger(thread: threading.Thread) -> bool:
    """Whether ``thread`` is the watcher of a ledger's lingering hold."""
    return thread.name == "ledger-linger"


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_ledgers_made_and_dropped_leave_no_descriptor_open(tmp_path: Path) -> None:
    path = tmp_path / "ledger.duckdb"
    Ledger(path, linger=0).register("bank", bank_graph())
    before = open_descriptors()
    watchers = set(threading.enumerate())  # those of other tests' ledgers go on meanwhile
    for _ in range(30):  # as a sensor makes one per tick
        assert Ledger(path, linger=0.05).pipelines() == ["bank"]
    assert wait_free(path)
    # Each watcher closes what it holds after letting go, then ends.
    wait_until(
        lambda: not [t for t in threading.enumerate() if t not in watchers and linger(t)],
        10,
        "the end of every watcher of these ledgers",
    )
    assert open_descriptors() <= before + 3


def test_a_wait_is_seen_when_the_want_file_was_replaced_or_the_lock_file_deleted(
    tmp_path: Path,
) -> None:
    path, ledger = registered(tmp_path, 60)
    child = (
        "from progress.ledger import Ledger; "
        f"print(Ledger({str(path)!r}, lock_timeout=20, linger=0).pipelines())"
    )
    # The waiter marks a new .want file: the holder looks at the file at the path.
    want = path.with_name(path.name + ".want")
    wait_until(lambda: looked(ledger), 10, "the holder's first look (it opens .want)")
    want.unlink()
    started = time.monotonic()
    assert python(child).stdout.split() == ["['bank']"]
    assert time.monotonic() - started < 15  # not the waiter's 20 s timeout
    # The waiter locks a new lock file at once, and DuckDB refuses its attach while the
    # holder has the file attached: it marks its wait then.
    assert ledger.pipelines() == ["bank"]
    assert not free(path)
    path.with_name(path.name + ".lock").unlink()
    started = time.monotonic()
    assert python(child).stdout.split() == ["['bank']"]
    assert time.monotonic() - started < 15


def test_a_lingering_ledger_whose_directory_is_removed_is_let_go(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _, ledger = registered(home, 60)
    wait_until(lambda: looked(ledger), 10, "the holder's first look (it opens .want)")
    shutil.rmtree(home)
    # Let go, not held until exit.
    wait_until(lambda: ledger._sessions._file._held is None, 10, "the lingering hold let go")


def test_release_all_lets_every_lingering_file_of_the_process_go(tmp_path: Path) -> None:
    from progress.ledger import release_all

    paths, ledgers = [], []
    for name in ("a", "b"):
        path, ledger = registered(tmp_path / name, 60)
        paths.append(path)
        ledgers.append(ledger)
    assert not any(free(p) for p in paths)
    release_all()
    assert all(free(p) for p in paths)
    assert ledgers[0].pipelines() == ["bank"]  # attached again on the next use


def watcher_of(ledger: Ledger) -> threading.Thread:
    """The thread watching ``ledger``'s current hold."""
    file = ledger._sessions._file
    found = [
        t
        for t in threading.enumerate()
        if linger(t) and t._args[0] is file  # type: ignore[attr-defined]
    ]
    assert found, "no watcher for the ledger's hold"
    return found[-1]


def wakeups(thread: threading.Thread) -> int:
    """How many times ``thread`` has gone to sleep and been woken (its voluntary switches)."""
    status = Path(f"/proc/self/task/{thread.native_id}/status").read_text()
    (line,) = [x for x in status.splitlines() if x.startswith("voluntary_ctxt_switches")]
    return int(line.split()[1])


def test_a_lingering_holder_sleeps_until_a_waiter_marks_the_file_and_lets_it_go_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    look = 10 * IDLE_LOOK  # a wait that took a look to end is far from one the mark ended
    monkeypatch.setattr(engine, "IDLE_LOOK", look)
    path, ledger = registered(tmp_path, 60)
    assert WantWatch.open(path.with_name(path.name + ".want")) is not None  # inotify here
    watcher = watcher_of(ledger)
    before = wakeups(watcher)
    time.sleep(1.0)
    # Asleep: woken once a look at most (to look at its linger), not every few ms.
    assert wakeups(watcher) - before <= 10
    waited = []
    for _ in range(5):
        ledger.pipelines()  # held again, lingering
        started = time.monotonic()
        assert Ledger(path, lock_timeout=10, linger=0).pipelines() == ["bank"]
        waited.append(time.monotonic() - started)
    # The waiter's mark wakes the watcher at once, not at its next look: a look after the hold
    # began (``IDLE_LOOK``), as each of these waits would take without the wake.
    assert sorted(waited)[2] < look / 2, waited


def test_a_hold_begun_while_another_holder_waits_is_let_go_after_its_first_use(
    tmp_path: Path,
) -> None:
    path, ledger = registered(tmp_path, 60)
    ledger.release()
    mark_fd = os.open(path.with_name(path.name + ".want"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        mark(mark_fd)  # a waiter queued before the next hold began: it touched no watch then
        assert ledger.pipelines() == ["bank"]
        assert free(path)  # let go as the use ended, not at the watcher's first look
    finally:
        unmark(mark_fd)  # and closed


def queued(path: Path) -> int:
    """How many holders are blocked in the kernel's queue for the lock of ``path``."""
    inode = os.stat(path.with_name(path.name + ".lock")).st_ino
    lines = Path("/proc/locks").read_text().splitlines()
    return sum(1 for line in lines if "->" in line and f":{inode} " in line)


def test_holders_queued_behind_a_hold_get_the_file_in_turn_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    look = 4 * IDLE_LOOK  # turns that each took a look are far from turns taken at once
    monkeypatch.setattr(engine, "IDLE_LOOK", look)
    path, _ = registered(tmp_path, 0)
    waiters = 6
    holders = [Ledger(path, lock_timeout=60, linger=60) for _ in range(waiters)]
    failed: list[BaseException] = []

    def use(holder: Ledger) -> None:
        try:
            holder.pipelines()  # then it lingers, with the others queued behind it
        except BaseException as err:  # shown by the test's thread
            failed.append(err)

    lock_fd = os.open(path.with_name(path.name + ".lock"), os.O_RDWR)
    fcntl.flock(lock_fd, fcntl.LOCK_EX)  # a holder that never lingers: they all queue
    threads = [threading.Thread(target=use, args=(h,)) for h in holders]
    for thread in threads:
        thread.start()
    wait_until(lambda: queued(path) == waiters, 30, "every holder queued for the lock")
    started = time.monotonic()
    fcntl.flock(lock_fd, fcntl.LOCK_UN)
    os.close(lock_fd)
    for thread in threads:
        thread.join(60)
    took = time.monotonic() - started
    for holder in holders:
        holder.release()
    assert failed == []
    # Each hold begins with the rest queued behind it, marked before it began: kept until its
    # watcher's first look (``IDLE_LOOK``), these turns would take about 10 s.
    assert took < (waiters - 1) * look / 2, took
