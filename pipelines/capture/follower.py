"""Following commits: the captures of every pipeline a commit wrote are synced soon after.

A commit that writes batches of a pipeline with a capture not stopped tells this process's
``Follower`` (``follow`` adds one per ``Ledger`` object). The follower syncs that pipeline's
captures in a thread of its own, ``SYNC_DELAY`` seconds after the first commit it has not
synced yet, so that the commits made meanwhile (the stages of a run, a worker's sends and
advances) cost one sync together; ``settle`` syncs at once (``Runtime.run`` does before it
returns, and every command before it exits). A process that exits with a sync pending makes
it first; one killed first leaves its captures behind until the next sync, as a kill between
a commit and its sync always has: every sync brings a log up to the ledger, whatever it lacks.
"""

from __future__ import annotations

import logging
import os
import threading
import weakref

from pipelines.capture.sync import sync_pipeline
from progress.errors import EpochgateError
from progress.ledger import CaptureRecord, Ledger

log = logging.getLogger("epochgate.capture")

SYNC_DELAY = 0.5
"""Seconds a commit's sync waits for the commits after it (a capture is this much behind its
ledger, plus the sync, while commits go on)."""


def _warn(found: CaptureRecord, err: Exception) -> None:
    log.warning(
        "capture of %s.%s into %s is behind: %s", found.pipeline, found.stage, found.directory, err
    )


class Follower:
    """The listener ``follow`` adds: it syncs the captures of each pipeline a commit of
    ``ledger`` wrote, ``delay`` seconds after the first commit not synced yet (0: at once, in
    the committing thread). It holds its ledger weakly, and strongly only while a sync is
    pending, so a ledger no one uses any more goes away with its follower."""

    def __init__(self, ledger: Ledger, delay: float = SYNC_DELAY) -> None:
        self._ledger = weakref.ref(ledger)
        self.delay = delay
        self._pending: set[str] = set()
        self._holding: Ledger | None = None
        self._timer: threading.Timer | None = None
        self._state = threading.Lock()
        self._syncing = threading.Lock()

    def __call__(self, pipelines: frozenset[str]) -> None:
        with self._state:
            self._pending |= pipelines
            self._holding = self._ledger()
            if self.delay > 0 and self._timer is None:
                self._timer = threading.Timer(self.delay, self.settle)
                self._timer.name = "epochgate-capture-sync"
                self._timer.daemon = False  # an exiting process syncs first
                self._timer.start()
        if self.delay <= 0:
            self.settle()

    @property
    def pending(self) -> frozenset[str]:
        """The pipelines committed to since their captures were last synced."""
        with self._state:
            return frozenset(self._pending)

    def settle(self) -> None:
        """Sync now the captures of every pipeline committed to since the last sync."""
        with self._syncing:
            with self._state:
                pipelines, self._pending = self._pending, set()
                ledger, self._holding = self._holding, None
                timer, self._timer = self._timer, None
            if timer is not None and timer is not threading.current_thread():
                timer.cancel()
            if ledger is None:
                return
            for pipeline in sorted(pipelines):
                try:
                    sync_pipeline(ledger, pipeline, on_error=_warn)
                except (EpochgateError, OSError) as err:  # the ledger: the next sync repairs
                    log.warning("captures of %s are behind: %s", pipeline, err)

    def forked(self) -> None:
        """In a forked child: nothing pending, no timer, fresh locks (the parent syncs)."""
        self._pending, self._holding, self._timer = set(), None, None
        self._state, self._syncing = threading.Lock(), threading.Lock()


_followers: weakref.WeakKeyDictionary[Ledger, Follower] = weakref.WeakKeyDictionary()


def _in_child() -> None:
    for found in list(_followers.values()):
        found.forked()


os.register_at_fork(after_in_child=_in_child)


def follow(ledger: Ledger, delay: float = SYNC_DELAY) -> Follower:
    """Make every commit of this ``Ledger`` object that can change a captured stream sync the
    captures of its pipeline (see the module docs); the ledger's follower (added once)."""
    found = _followers.get(ledger)
    if found is None:
        found = _followers[ledger] = Follower(ledger, delay)
        ledger.on_commit(found)
    return found


def settle_all() -> None:
    """Sync now what every follower of this process has pending (a command, before it exits)."""
    for found in list(_followers.values()):
        found.settle()
