"""``python -m dagster_project.dev.demo`` (``make demo``): the bank example driven through Dagster.

The same story as ``epochgate demo``, with Dagster in charge of the runs: seeded inputs are
sent epoch by epoch while worker 2 of ``card_payments`` holds the late epoch open; after each
epoch the frontier sensor ticks and its runs execute in this process (as the daemon would
launch them), until the sensor has nothing to run. The sensor's reason then names the worker
that holds the epoch. A few accounts are read from ``balances``, which is partial: an upquery
fills them, a second read is a hit, one is evicted and read again; one more account is read as
of the held epoch, which is recorded as a pending upquery (the upquery sensor says what holds
it). The late file arrives, every input closes, the frontier sensor runs the rest, the upquery
sensor's run fills the pending read, and that read is then a hit. The state of ``balances`` is
printed as ``epochgate state`` shows it, and every stage at every epoch is compared with the
same computation in DuckDB SQL over the raw inputs (each read too). The process exits non-zero
on a mismatch or a failed run.

Everything lands in a persistent Dagster instance, ``$EPOCHGATE_HOME/dagster`` (default
``.epochgate/dagster``; it is the ``DAGSTER_HOME`` of the demo and of ``make ui``, with the
project's ``dagster.yaml`` copied in when it has none: ``dagster_project.dev.instance``), so
``make ui`` shows the runs, partitions, materializations and checks. The demo's inputs,
ledger, data and state live in ``$EPOCHGATE_HOME/demo``, replaced on each run (as ``epochgate
demo`` does); the instance's epoch partitions start over with them, while earlier runs stay in
its history.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import dagster as dg

from dagster_project.definitions import build_definitions
from dagster_project.dev.driver import DriveError, Driver, LaunchedRun
from dagster_project.dev.instance import instance_home
from dagster_project.in_flight import IN_FLIGHT
from dagster_project.names import job_name, upquery_job_name, upquery_sensor_name
from dagster_project.partitions import partitions_name
from dagster_project.resources import LedgerResource, SparkResource
from pipelines.cli import reports
from pipelines.cli.keyed import state_text
from pipelines.cli.references import load
from pipelines.errors import ReadPendingError
from pipelines.examples import bank
from pipelines.examples.bank_data import ORACLE_SQL, DemoData, Oracle
from pipelines.examples.demo import (
    HELD,
    Echo,
    bad_epoch,
    check_lookup,
    correct_accounts,
    describe_checks,
    describe_lookup,
    prepare,
    read_balances,
    release,
    send_epoch,
    verify_outputs,
)
from pipelines.examples.sizes import add_size_options
from pipelines.run.runtime import Runtime
from pipelines.settings import DEMO_DIR, state_dir
from pipelines.spark.session import master_url
from progress import EpochgateError

READ_ACCOUNTS = 2
"""Accounts the demo reads, evicts and reads again (one more is read before its epoch is done)."""
DAEMON_SILENCE = 60.0
"""Seconds without a daemon heartbeat after which no daemon is taken to use the instance (a
live one beats every 30 seconds)."""


class DemoError(EpochgateError):
    """The demo cannot start: something else uses its Dagster instance."""


@dataclass(frozen=True)
class DagsterDemoSummary:
    """What the demo did: its sizes, the Dagster runs, timing and the oracle's verdict."""

    epochs: int
    input_rows: int
    runs: tuple[LaunchedRun, ...]
    seconds: float
    """From the first send to the end of the last run."""
    mismatches: tuple[str, ...]
    failure: str | None = None
    """Why driving stopped early (a failed run), if it did."""
    expected_failures: int = 0
    """Runs that failed as the demo meant them to (the bad accounts file's)."""

    @property
    def succeeded(self) -> int:
        return sum(r.success for r in self.runs)

    @property
    def verified(self) -> bool:
        return self.failure is None and not self.mismatches

    @property
    def ok(self) -> bool:
        return self.verified and self.succeeded + self.expected_failures == len(self.runs)


def check_no_daemon(instance: dg.DagsterInstance, *, now: float | None = None) -> None:
    """Refuse to start while a Dagster daemon uses ``instance``: its frontier sensor would run
    the demo's epochs too, and the demo would verify outputs still being written."""
    beats = instance.get_daemon_heartbeats().values()
    latest = max((b.timestamp for b in beats), default=None)
    now = time.time() if now is None else now
    if latest is not None and now - latest < DAEMON_SILENCE:
        where = instance.root_directory if instance.is_persistent else "this instance"
        raise DemoError(
            f"a Dagster daemon uses the instance at {where} (its last heartbeat is "
            f"{now - latest:.0f}s old): stop `make ui` / `dagster dev` first, or wait a minute "
            "if you just did"
        )


def fail_left_over_runs(instance: dg.DagsterInstance, pipeline: str = "bank") -> list[str]:
    """Mark the pipeline's runs that an earlier, interrupted demo left queued or running as
    failed (no daemon runs them, and the ledger they read is replaced); return their ids.
    Left in flight, they would keep the sensor from requesting their stages."""
    runs = [
        run
        for name in (job_name(pipeline), upquery_job_name(pipeline))
        for run in instance.get_runs(filters=dg.RunsFilter(job_name=name, statuses=list(IN_FLIGHT)))
    ]
    for run in runs:
        instance.report_run_failed(
            run, message="Its process ended without finishing it (an interrupted demo)."
        )
    return [run.run_id for run in runs]


def drop_epoch_partitions(instance: dg.DagsterInstance, pipeline: str = "bank") -> None:
    """Forget the epoch partitions of an earlier demo, whose ledger is being replaced: the
    sensor adds this demo's epochs again as it reaches them (their history stays)."""
    name = partitions_name(pipeline)
    for key in instance.get_dynamic_partitions(name):
        instance.delete_dynamic_partition(name, key)


def run_demo(
    home: Path,
    instance: dg.DagsterInstance,
    *,
    epochs: int = 4,
    rows: int = 2000,
    accounts: int = 200,
    seed: int = 42,
    spark_master: str | None = None,
    echo: Echo = print,
) -> DagsterDemoSummary:
    """Run the demo (see the module docs) with its state in ``home`` (replaced) and its runs in
    ``instance``."""
    check_no_daemon(instance)
    for run_id in fail_left_over_runs(instance):
        echo(f"marked run {run_id} of an interrupted demo as failed")
    drop_epoch_partitions(instance)
    data, spark = prepare(
        home,
        epochs=epochs,
        rows=rows,
        accounts=accounts,
        seed=seed,
        spark_master=spark_master,
        echo=echo,
    )
    ledger = LedgerResource(path=str(home / "ledger.duckdb"), data_dir=str(home / "data"))
    defs = build_definitions(
        [bank.pipeline()], spark=SparkResource(master=master_url(spark_master)), ledger=ledger
    )
    driver = Driver(defs, instance)
    rt = Runtime(load("bank"), ledger.ledger(), spark, ledger.data_root)  # with its reference

    def ran(run: LaunchedRun) -> None:
        echo(f"  {run.describe()}")

    oracle = Oracle(data.root)
    mismatches: list[str] = []
    failure: str | None = None
    expected = 0
    started = time.perf_counter()
    try:
        reason, expected = send_epochs(rt, driver, data, echo)
        source, worker = HELD
        echo(f"\nthe sensor, while worker {worker} of {source} holds epoch {data.late_epoch}:")
        echo(f"  {reason.skip_message or ''}")
        echo("\nstatus:")
        echo(reports.status_table(rt.ledger.status("bank")))
        first, *others = oracle.some_accounts(READ_ACCOUNTS + 1)
        echo("\nreads of balances (partial: it keeps only the accounts that are read):")
        mismatches += read_balances(rt, oracle, others, echo)
        pending = read_pending(rt, driver, first, data.late_epoch, echo)
        echo(f"\nreleasing: the late file of epoch {data.late_epoch} arrives; every input closes")
        release(rt, data)
        reason = driver.drive(on_run=ran)
        echo(f"the sensor: {reason.skip_message or ''}")
        if pending:
            mismatches += answer_pending(
                rt, driver, oracle, first, epoch=data.late_epoch, echo=echo
            )
        echo("\nepochgate state:")
        echo(state_text([rt.state_info("balances")]))
    except DriveError as err:
        failure = str(err)
        echo(f"\nstopped: {failure}")
    seconds = time.perf_counter() - started

    if failure is None:  # after a failed run some outputs are missing: nothing to compare
        echo("\nchecking every stage at every epoch against DuckDB SQL over the raw inputs")
        mismatches += verify_outputs(rt, oracle, epochs)
        for line in mismatches:
            echo(f"  MISMATCH {line}")
    summary = DagsterDemoSummary(
        epochs,
        oracle.input_rows(),
        tuple(driver.runs),
        seconds,
        tuple(mismatches),
        failure,
        expected,
    )
    report(summary, rt, echo)
    return summary


def report(summary: DagsterDemoSummary, rt: Runtime, echo: Echo) -> None:
    """The demo's last lines: what the expectations found, its runs, its speed, the oracle's
    verdict and the ledger's."""
    echo("\nexpectations (each is an asset check per epoch in the UI):")
    for line in describe_checks(rt.expectations()):
        echo(f"  {line}")
    verdict = "verified" if summary.verified else "NOT verified"
    meant = f" ({summary.expected_failures} failed as meant)" if summary.expected_failures else ""
    epochs = summary.epochs
    echo(
        f"\nbank through Dagster: {epochs} epochs, {summary.input_rows:,} input rows, "
        f"{len(summary.runs)} Dagster runs launched, {summary.succeeded} succeeded{meant}, "
        f"{summary.seconds / epochs:.1f}s per epoch, {len(ORACLE_SQL)} stages x {epochs} "
        f"epochs {verdict}"
    )
    verify = rt.ledger.verify()
    echo(f"ledger: {'ok' if verify.ok else 'FAILED'} ({verify.batches} batches)")


def send_epochs(
    rt: Runtime, driver: Driver, data: DemoData, echo: Echo
) -> tuple[dg.SkipReason, int]:
    """Each epoch sent, then the sensor's runs, the bad accounts file's included: the last
    skip reason, and the runs that failed as meant."""
    expected = 0
    reason = dg.SkipReason()
    for epoch in range(data.epochs):
        bad = epoch == bad_epoch(data)
        more = " (an accounts file with regions missing)" if bad else ""
        echo(f"epoch {epoch}: sending{more}, then the sensor ticks and its runs execute")
        send_epoch(rt, data, epoch, bad_accounts=bad)
        if bad:
            expected = fail_then_correct(rt, driver, data, epoch, echo)
        reason = driver.drive(on_run=lambda run: echo(f"  {run.describe()}"))
    return reason, expected


def fail_then_correct(rt: Runtime, driver: Driver, data: DemoData, epoch: int, echo: Echo) -> int:
    """The runs of ``epoch`` after the bad accounts file: ``enriched`` fails its expectation
    ``region_known``; the sensor then holds the epoch, naming the failure, and does not run it
    again until the accounts worker corrects the file. Returns the runs that failed."""
    failed, level = 0, driver.console_log_level
    driver.console_log_level = "CRITICAL"  # the failure is meant: its line says it all
    try:
        driver.drive(on_run=lambda run: echo(f"  {run.describe()}"))
    except DriveError:
        failed = sum(not r.success for r in driver.runs)
    finally:
        driver.console_log_level = level
    reason = driver.tick().skip_reason
    echo(f"  the sensor: {reason.skip_message if reason else ''}")
    correct_accounts(rt, data, epoch, echo)
    return failed


def read_pending(rt: Runtime, driver: Driver, account: int, epoch: int, echo: Echo) -> bool:
    """A read of ``account`` as of ``epoch``, which ``balances`` has not processed: it is
    recorded as a pending upquery, and the upquery sensor says what holds it. Whether it was
    recorded (it is not when the stage has processed ``epoch`` already)."""
    try:
        found = rt.pending_reads.lookup_or_request("balances", [account], as_of=epoch)
    except ReadPendingError as err:
        echo(f"  lookup [{account}] as of epoch {epoch}: {err}")
        reason = driver.tick(upquery_sensor_name("bank")).skip_reason
        echo(f"  the upquery sensor: {reason.skip_message if reason else ''}")
        return True
    echo(f"  lookup [{account}] {describe_lookup(found)}")
    return False


def answer_pending(
    rt: Runtime, driver: Driver, oracle: Oracle, account: int, *, epoch: int, echo: Echo
) -> list[str]:
    """The upquery sensor fills the pending read once ``balances`` has processed its epoch; the
    read of ``account`` is then a hit. Returns the mismatches with the oracle."""
    echo(f"\nthe upquery sensor, now that balances has processed epoch {epoch}:")
    reason = driver.drive(
        on_run=lambda run: echo(f"  {run.describe()}"), sensor_name=upquery_sensor_name("bank")
    )
    echo(f"  then: {reason.skip_message or ''}")
    found = rt.lookup("balances", [account], as_of=epoch)
    echo(f"  lookup [{account}] {describe_lookup(found)}")
    return check_lookup(found, oracle, [account])


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m dagster_project.dev.demo",
        description=(
            "The bank example driven through Dagster on the local instance in "
            "$EPOCHGATE_HOME/dagster (see it with `make ui`), checked against DuckDB SQL."
        ),
    )
    add_size_options(parser)
    parser.add_argument(
        "--spark", metavar="MASTER", help="Spark master (default: $EPOCHGATE_SPARK or local[2])"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the demo on the instance in ``$EPOCHGATE_HOME/dagster``; 0 when every run succeeded
    and every output matches the oracle."""
    args = build_parser().parse_args(argv)
    state = state_dir()
    home = instance_home(state)
    os.environ["DAGSTER_HOME"] = str(home)
    try:
        with dg.DagsterInstance.get() as instance:
            summary = run_demo(
                state / DEMO_DIR,
                instance,
                epochs=args.epochs,
                rows=args.rows,
                accounts=args.accounts,
                seed=args.seed,
                spark_master=args.spark,
            )
    except EpochgateError as err:
        print(f"demo: {err}", file=sys.stderr)
        return 1
    print(f"Dagster instance: {home} (`make ui` shows these runs, partitions and metadata)")
    return 0 if summary.ok else 1


if __name__ == "__main__":
    sys.exit(main())
