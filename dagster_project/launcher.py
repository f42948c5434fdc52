"""A run launcher that hands each run to a warm worker process instead of starting one per run.

Dagster's default launcher asks the code server for a new ``dagster api execute_run`` process
per run: seconds of process start, imports and code loading, then a Spark session, before the
first stage runs. ``WarmRunLauncher`` keeps ``workers`` processes (``dagster_project.run_worker``)
with those done and hands them runs over a pipe, oldest worker with the fewest runs first; a
worker executes its runs one at a time with Dagster's own execution body, so the event log, run
status, materializations and the UI are those of any run. Set it in the instance's
``dagster.yaml``::

    run_launcher:
      module: dagster_project.launcher
      class: WarmRunLauncher
      config:
        workers: 2

Workers start with the first run the launcher is given (in the daemon, which launches queued
runs) and stop when its instance is disposed, or when their launcher's process is gone (their
stdin closes). A worker that dies fails the run it was executing (cancels it if it was being
cancelled) and is replaced; the runs waiting for it go to the replacement. Runs are not resumed
(``supports_resume_run`` is false). ``terminate`` cancels a run that has not started in its
worker and stops the worker that is executing it.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import dagster as dg

from dagster_project import run_worker
from dagster_project.internals import (
    CheckRunHealthResult,
    ConfigurableClass,
    ConfigurableClassData,
    LaunchRunContext,
    RunLauncher,
    UserConfigSchema,
    WorkerStatus,
)
from dagster_project.names import WORKER_TAG

__all__ = ["WarmRunLauncher"]

DEFAULT_PRELOAD = ("dagster_project",)
"""What a worker imports before its first run: Dagster and epochgate's run path (PySpark comes
with the Spark session it opens). Add the code location's module (``preload:
[my_project.definitions]``) to have it loaded before the first run too."""
STOP_TIMEOUT = 10.0
"""Seconds a worker has to exit after SIGTERM before it is killed."""

log = logging.getLogger("epochgate.launcher")


@dataclass
class Worker:
    """One worker process and the runs handed to it that have not ended, oldest first."""

    process: subprocess.Popen[str]
    runs: list[str] = field(default_factory=list)
    running: str | None = None
    """The run the worker said it started and has not ended."""

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def send(self, run_id: str) -> None:
        stdin = self.process.stdin
        assert stdin is not None
        stdin.write(run_id + "\n")
        stdin.flush()


def is_worker(pid: int) -> bool:
    """Whether ``pid`` is a live run worker (for runs another launcher object handed out)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return run_worker.__name__.encode() in cmdline


class WarmRunLauncher(RunLauncher, ConfigurableClass):
    """Runs executed by ``workers`` warm processes (see the module docs)."""

    def __init__(
        self,
        workers: int = 1,
        preload: Sequence[str] = DEFAULT_PRELOAD,
        spark: bool = True,
        inst_data: ConfigurableClassData | None = None,
    ) -> None:
        if workers < 1:
            raise ValueError(f"WarmRunLauncher needs at least 1 worker, got {workers}")
        self.workers = workers
        self.preload = tuple(preload)
        self.spark = spark
        self._inst_data = inst_data
        self._lock = threading.RLock()
        self._pool: list[Worker] = []
        self._owner: dict[str, Worker] = {}
        self._closed = False
        super().__init__()  # type: ignore[no-untyped-call]

    # -- configuration ------------------------------------------------------------------------

    @property
    def inst_data(self) -> ConfigurableClassData | None:
        return self._inst_data

    @classmethod
    def config_type(cls) -> UserConfigSchema:
        return {
            "workers": dg.Field(int, default_value=1, is_required=False),
            "preload": dg.Field([str], default_value=list(DEFAULT_PRELOAD), is_required=False),
            "spark": dg.Field(bool, default_value=True, is_required=False),
        }

    @classmethod
    def from_config_value(
        cls, inst_data: ConfigurableClassData, config_value: Mapping[str, Any]
    ) -> WarmRunLauncher:
        return cls(inst_data=inst_data, **config_value)

    # -- workers ------------------------------------------------------------------------------

    def _spawn(self) -> Worker:
        env = dict(os.environ)
        env[run_worker.PRELOAD_ENV] = ",".join(self.preload)
        env[run_worker.SPARK_ENV] = "1" if self.spark else "0"
        ref = dg.serialize_value(self._instance.get_ref())
        process = subprocess.Popen(
            [sys.executable, "-m", run_worker.__name__, ref],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            text=True,
            bufsize=1,
        )
        worker = Worker(process)
        threading.Thread(
            target=self._follow, args=(worker,), name=f"run-worker-{worker.pid}", daemon=True
        ).start()
        log.info("started run worker %s", worker.pid)
        return worker

    def _follow(self, worker: Worker) -> None:
        """Track what ``worker`` says until its stdout closes, then deal with its end."""
        stdout: IO[str] | None = worker.process.stdout
        assert stdout is not None
        for line in stdout:
            word, _, run_id = line.strip().partition(" ")
            with self._lock:
                if word == run_worker.START:
                    worker.running = run_id
                elif word == run_worker.END:
                    worker.running = None
                    if run_id in worker.runs:
                        worker.runs.remove(run_id)
                    self._owner.pop(run_id, None)
        code = worker.process.wait()
        try:
            self._lost(worker, code)
        except Exception:  # the instance may be gone with the process that held it
            log.exception("run worker %s exited with code %s", worker.pid, code)

    def _lost(self, worker: Worker, code: int) -> None:
        """``worker`` exited: end its current run, and hand its waiting runs to a new worker."""
        with self._lock:
            if worker in self._pool:
                self._pool.remove(worker)
            current, waiting = worker.running, [r for r in worker.runs if r != worker.running]
            worker.runs.clear()
            replacement: Worker | None = None
            if not self._closed:
                replacement = self._spawn()
                self._pool.append(replacement)
        if current is not None:
            self._end(current, f"its run worker (pid {worker.pid}) exited with code {code}")
        for run_id in waiting:
            run = self._instance.get_run_by_id(run_id)
            if run is None or run.is_finished:
                continue
            if replacement is None:
                self._end(run_id, f"its run worker (pid {worker.pid}) stopped before the run")
            else:
                self._hand(run, replacement)

    def _end(self, run_id: str, why: str) -> None:
        """Mark an unfinished run cancelled (if it was being cancelled) or failed."""
        with self._lock:
            self._owner.pop(run_id, None)
        run = self._instance.get_run_by_id(run_id)
        if run is None or run.is_finished:
            return
        if run.status == dg.DagsterRunStatus.CANCELING:
            self._instance.report_run_canceled(run, f"Run cancelled: {why}.")
        else:
            self._instance.report_run_failed(run, f"Run failed: {why}.")

    def _hand(self, run: dg.DagsterRun, worker: Worker | None = None) -> None:
        """Give ``run`` to ``worker``, or (none given, or gone meanwhile) to the live worker
        with the fewest runs, starting the pool first if it is not full."""
        with self._lock:
            if self._closed:
                raise dg.DagsterInvariantViolationError("WarmRunLauncher: launched after dispose")
            if worker is None or worker not in self._pool:
                while len(self._pool) < self.workers:
                    self._pool.append(self._spawn())
                worker = min(self._pool, key=lambda w: len(w.runs))
            worker.runs.append(run.run_id)
            self._owner[run.run_id] = worker
        self._instance.add_run_tags(run.run_id, {WORKER_TAG: str(worker.pid)})
        self._instance.report_engine_event(
            f"Handed to warm run worker (pid {worker.pid}).", run, cls=self.__class__
        )
        worker.send(run.run_id)

    # -- RunLauncher --------------------------------------------------------------------------

    def launch_run(self, context: LaunchRunContext) -> None:
        self._hand(context.dagster_run)

    def terminate(self, run_id: str) -> bool:
        run = self._instance.get_run_by_id(run_id)
        if run is None or run.is_finished:
            return False
        self._instance.report_run_canceling(run)
        with self._lock:
            owner = self._owner.get(run_id)
            if owner is not None:  # a worker of ours: stop it only if it executes the run
                pid = owner.pid if owner.running == run_id else None
            else:  # handed out by another launcher object (the daemon's)
                tagged = run.tags.get(WORKER_TAG)
                started = run.status == dg.DagsterRunStatus.STARTED
                pid = int(tagged) if tagged and started and is_worker(int(tagged)) else None
        if pid is None:
            return True  # the worker skips a cancelled run when it comes to it
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            return False
        return True

    @property
    def supports_check_run_worker_health(self) -> bool:
        return True

    def check_run_worker_health(self, run: dg.DagsterRun) -> CheckRunHealthResult:
        with self._lock:
            owner = self._owner.get(run.run_id)
        tagged = run.tags.get(WORKER_TAG)
        if owner is not None:
            alive = owner.alive()
        elif tagged:
            alive = is_worker(int(tagged))
        else:
            return CheckRunHealthResult(WorkerStatus.NOT_FOUND, "no run worker was given the run")
        if alive:
            return CheckRunHealthResult(WorkerStatus.RUNNING, run_worker_id=tagged)
        return CheckRunHealthResult(
            WorkerStatus.FAILED, f"run worker {tagged} is gone", run_worker_id=tagged
        )

    def dispose(self) -> None:
        """Stop every worker (SIGTERM, then SIGKILL after ``STOP_TIMEOUT``)."""
        with self._lock:
            self._closed = True
            pool, self._pool = list(self._pool), []
        for worker in pool:
            if worker.process.stdin is not None:
                worker.process.stdin.close()
            if worker.alive():
                worker.process.terminate()
        for worker in pool:
            try:
                worker.process.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                worker.process.kill()
                worker.process.wait()
