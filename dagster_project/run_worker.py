"""A warm run worker: one process that executes Dagster runs one after another.

``WarmRunLauncher`` (``dagster_project.launcher``) starts it as
``python -m dagster_project.run_worker INSTANCE_REF`` with the modules to import first and
whether to open a Spark session in its environment. It imports them, opens the session (the
master from ``$EPOCHGATE_SPARK``, else ``local[2]``) and keeps both for every run it executes,
so a run costs neither a process start, nor the imports, nor a Spark session.

Protocol, one line each way: the launcher writes a run id on the worker's stdin; the worker
answers on its stdout ``ready`` once warm, then ``start RUN_ID`` and ``end RUN_ID`` around each
run (everything else the worker or its runs print goes to stderr). A run is executed by
Dagster's own ``dagster api execute_run`` body: the same engine events, event log, run status
and materializations as a run in a process of its own. The worker exits when its stdin closes
(its launcher is gone).
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
import time
from typing import IO, TYPE_CHECKING

import dagster as dg

from dagster_project.internals import InstanceRef, execute_run_body

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

PRELOAD_ENV = "EPOCHGATE_WORKER_PRELOAD"
"""Comma-separated modules a worker imports before it says it is ready."""
SPARK_ENV = "EPOCHGATE_WORKER_SPARK"
"""``1``: a worker opens a Spark session before it says it is ready and keeps it open."""
IDLE_CHECK_SECONDS = 300.0
"""After this long without a run, a worker checks its Spark session still answers (a Spark
Connect server ends idle sessions) and opens a new one if not."""
READY, START, END = "ready", "start", "end"

log = logging.getLogger("epochgate.run_worker")


class WarmSpark:
    """The Spark session a worker keeps open between runs; runs find it active and reuse it."""

    def __init__(self) -> None:
        self.session: SparkSession | None = None
        self.used = time.monotonic()

    def open(self) -> None:
        from pipelines.spark.session import quiet_session

        try:
            self.session = quiet_session()
            self.session.range(1).count()  # the first job of a new local JVM is the slowest
        except Exception as err:  # a run opens its own session then, and reports any failure
            log.warning("run worker %s: no warm Spark session: %s", os.getpid(), err)
            self.session = None
        self.used = time.monotonic()

    def check(self) -> None:
        """Before a run: after a long idle time, make sure the session still answers."""
        from pipelines.spark._internals import abandon

        if self.session is not None and time.monotonic() - self.used > IDLE_CHECK_SECONDS:
            try:
                self.session.range(1).count()
            except Exception:
                log.warning("run worker %s: Spark session gone, opening a new one", os.getpid())
                abandon(self.session)  # else the next session asked for would be this one
                self.open()
        self.used = time.monotonic()


def say(out: IO[str], *words: str) -> None:
    out.write(" ".join(words) + "\n")
    out.flush()


def serve(
    instance: dg.DagsterInstance, commands: IO[str], answers: IO[str], spark: WarmSpark
) -> None:
    """Execute each run id read from ``commands`` until it ends."""
    say(answers, READY)
    while line := commands.readline():
        run_id = line.strip()
        if not run_id:
            continue
        run = instance.get_run_by_id(run_id)
        if run is None or run.status != dg.DagsterRunStatus.STARTING:
            if run is not None and run.status == dg.DagsterRunStatus.CANCELING:
                instance.report_run_canceled(run, "Run cancelled before its worker started it.")
            say(answers, END, run_id)  # not ours to execute (any more)
            continue
        say(answers, START, run_id)
        spark.check()
        try:
            execute_run_body(run_id, instance, lambda _event: None, set_exit_code_on_failure=False)
        finally:
            spark.used = time.monotonic()
            say(answers, END, run_id)


def main(argv: list[str]) -> None:
    if len(argv) != 1:
        raise SystemExit("usage: python -m dagster_project.run_worker INSTANCE_REF_JSON")
    # The protocol keeps the real stdout; whatever else is printed goes to stderr.
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    ref = dg.deserialize_value(argv[0], InstanceRef)
    for module in filter(None, os.environ.get(PRELOAD_ENV, "").split(",")):
        importlib.import_module(module.strip())
    spark = WarmSpark()
    if os.environ.get(SPARK_ENV) == "1":
        spark.open()
    with dg.DagsterInstance.from_ref(ref) as instance:
        serve(instance, sys.stdin, answers, spark)


if __name__ == "__main__":
    main(sys.argv[1:])
