"""``epochgate demo``: the bank example end to end, with one worker holding an epoch open.

Generates seeded inputs, sends them epoch by epoch while worker 2 of ``card_payments`` holds
the late epoch (its second file comes later), runs every ready stage, prints the status that
names the holder, releases the epoch, finishes, and checks every stage at every epoch against
the same computation in DuckDB SQL over the raw inputs.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipelines.cli import reports
from pipelines.cli.references import load
from pipelines.errors import RunFailedError
from pipelines.examples import bank
from pipelines.examples.bank_data import ORACLE_SQL, QUARANTINE_SQL, DemoData, Oracle, generate
from pipelines.reads.arrow_rows import collected_rows
from pipelines.reads.lookup import Lookup
from pipelines.run.expectations import ExpectationResult
from pipelines.run.iteration import describe_round
from pipelines.run.runtime import RunResult, Runtime
from pipelines.spark.session import quiet, spark_session
from progress.ledger import Ledger

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession

HELD = ("card_payments", bank.WORKERS["card_payments"] - 1)


def bad_epoch(data: DemoData) -> int | None:
    """The epoch at which the demo sends an accounts file with regions missing (then corrects
    it): the first one no worker holds back, so the failure shows at once."""
    return next((e for e in range(data.epochs) if e != data.late_epoch), None)


Echo = Callable[[str], None]


@dataclass(frozen=True)
class DemoSummary:
    epochs: int
    input_rows: int
    runs: int
    seconds: float
    mismatches: tuple[str, ...]

    @property
    def verified(self) -> bool:
        return not self.mismatches


def prepare(
    home: Path,
    *,
    epochs: int,
    rows: int,
    accounts: int,
    seed: int,
    spark_master: str | None,
    echo: Echo,
) -> tuple[DemoData, SparkSession]:
    """A fresh ``home`` with seeded bank inputs under ``inputs/``, and a quiet Spark session."""
    if home.exists():
        shutil.rmtree(home)
    echo(f"generating {epochs} epochs of ~{rows} rows over {accounts} accounts (seed {seed})")
    data = generate(home / "inputs", epochs=epochs, rows=rows, accounts=accounts, seed=seed)
    echo("starting Spark")
    spark = spark_session(spark_master)
    quiet(spark)
    return data, spark


def run_demo(
    home: Path,
    *,
    epochs: int = 4,
    rows: int = 2000,
    accounts: int = 200,
    seed: int = 42,
    spark_master: str | None = None,
    echo: Echo = print,
) -> DemoSummary:
    data, spark = prepare(
        home,
        epochs=epochs,
        rows=rows,
        accounts=accounts,
        seed=seed,
        spark_master=spark_master,
        echo=echo,
    )
    ledger = Ledger(home / "ledger.duckdb")
    rt = Runtime(
        load("bank"),  # registered with its reference: later commands need no -p
        ledger,
        spark,
        home / "data",
        on_round=lambda *progress: echo(f"    {describe_round(*progress)}"),
    )
    runs: list[RunResult] = []

    def progress(result: RunResult) -> None:
        runs.append(result)
        echo(f"  ran {result.describe()}")

    started = time.perf_counter()
    for epoch in range(epochs):
        bad = epoch == bad_epoch(data)
        echo(
            f"epoch {epoch}: sending" + (" (an accounts file with regions missing)" if bad else "")
        )
        send_epoch(rt, data, epoch, bad_accounts=bad)
        try:
            rt.run(progress)
        except RunFailedError as err:
            for failure in err.failures:
                echo(f"  FAILED {failure}")
            correct_accounts(rt, data, epoch, echo)
            rt.run(progress)

    echo("\nstatus while worker 2 of card_payments holds the late epoch:")
    echo(reports.status_table(ledger.status("bank")))

    echo(f"\nreleasing: the late file of epoch {data.late_epoch} arrives")
    release(rt, data)
    rt.run(progress)
    seconds = time.perf_counter() - started

    echo("\nexpectations:")
    for line in describe_checks(rt.expectations()):
        echo(f"  {line}")
    echo("\nchecking every stage at every epoch against DuckDB SQL over the raw inputs")
    oracle = Oracle(data.root)
    mismatches = tuple(verify_outputs(rt, oracle, epochs))
    summary = DemoSummary(epochs, oracle.input_rows(), len(runs), seconds, mismatches)
    for line in mismatches:
        echo(f"  MISMATCH {line}")
    status = "verified" if summary.verified else f"{len(mismatches)} MISMATCHES"
    echo(
        f"\nbank: {epochs} epochs, {summary.input_rows:,} input rows, {summary.runs} stage runs, "
        f"{seconds / epochs:.1f}s per epoch, {len(ORACLE_SQL)} stages x {epochs} epochs {status}"
    )
    if summary.verified:
        verify = ledger.verify()
        echo(f"ledger: {'ok' if verify.ok else 'FAILED'} ({verify.batches} batches)")
    return summary


def send_epoch(rt: Runtime, data: DemoData, epoch: int, *, bad_accounts: bool = False) -> None:
    """Every worker sends its files for ``epoch`` and advances past it, except the held worker:
    at the late epoch it sends only its first file, and from then on it waits. With
    ``bad_accounts``, the accounts worker sends a file with regions missing."""
    for source, workers in bank.WORKERS.items():
        for worker in range(workers):
            files = data.files(source, epoch, worker)
            if source == "accounts" and bad_accounts:
                files = [data.without_regions()]
            if (source, worker) == HELD and epoch >= data.late_epoch:
                if epoch == data.late_epoch:
                    rt.input(source, worker).send(files[0])
                continue
            handle = rt.input(source, worker)
            for path in files[:-1]:
                handle.send(path)
            if files:  # the last file and the epoch complete, in one commit
                handle.send(files[-1], advance_to=epoch + 1)
            else:
                handle.advance_to(epoch + 1)


def correct_accounts(rt: Runtime, data: DemoData, epoch: int, echo: Echo) -> None:
    """The accounts worker corrects ``epoch`` with the right file; the blockers of ``enriched``
    are printed before (its failed run) and after (none: it is ready again)."""
    for line in rt.blockers("enriched", epoch):
        echo(f"  enriched epoch {epoch} waits: {line}")
    echo(f"  correcting accounts at epoch {epoch} with the right file")
    rt.input("accounts", 0).correct(epoch, data.files("accounts", epoch, 0)[0])


def describe_checks(results: Sequence[ExpectationResult]) -> list[str]:
    """One line per expectation: its rows checked and failing over every epoch, and the runs
    it stopped."""
    lines = []
    for (stage, name), found in _by_expectation(results).items():
        kept = [r for r in found if r.committed]
        failing = sum(r.rows_failing for r in kept)
        checked = sum(r.rows_checked for r in kept)
        action = found[0].action.value
        line = (
            f"{stage}.{name} ({action}): {failing:,} of {checked:,} rows failing over "
            f"{len({r.epoch for r in kept})} epoch(s)"
        )
        stopped = [r for r in found if not r.committed]
        if stopped:
            where = ", ".join(f"epoch {r.epoch} ({r.rows_failing:,} rows)" for r in stopped)
            line += f"; stopped {len(stopped)} run(s): {where}"
        lines.append(line)
    return lines


def _by_expectation(
    results: Sequence[ExpectationResult],
) -> dict[tuple[str, str], list[ExpectationResult]]:
    out: dict[tuple[str, str], list[ExpectationResult]] = {}
    for r in results:
        out.setdefault((r.stage, r.expectation), []).append(r)
    return out


def release(rt: Runtime, data: DemoData) -> None:
    """The held worker sends its late file and every epoch after it; every worker closes."""
    source, worker = HELD
    handle = rt.input(source, worker)
    for epoch in range(data.late_epoch, data.epochs):
        files = data.files(source, epoch, worker)
        for path in files[1:] if epoch == data.late_epoch else files:
            handle.send(path)
        handle.advance_to(epoch + 1)
    for src, workers in bank.WORKERS.items():
        for w in range(workers):
            rt.input(src, w).close()


def describe_lookup(found: Lookup) -> str:
    """A lookup of ``balances`` in words: how it was answered, how long it took, the values."""
    how = [f"{len(found.upqueried)} by an upquery"] if found.upqueried else []
    how += [f"{len(found.hits)} hit(s)"] if found.hits else []
    values = ", ".join(
        f"account {r['account_id']}: {r['balance_cents']} cents after {r['movements']} movement(s)"
        for r in found.rows
    )
    return (
        f"as of epoch {found.as_of}, {' and '.join(how)} in {found.seconds * 1000:.0f} ms: "
        f"{values or 'no movement yet'}"
    )


def check_lookup(found: Lookup, oracle: Oracle, accounts: Sequence[int]) -> list[str]:
    """A lookup of ``accounts`` in ``balances`` against the oracle; a line if it differs."""
    got = sorted((r["account_id"], r["balance_cents"], r["movements"]) for r in found.rows)
    expected = oracle.balances_as_of(list(accounts), found.as_of)
    if got == expected:
        return []
    return [
        f"balances of accounts {list(accounts)} as of epoch {found.as_of}: {got}, oracle {expected}"
    ]


def read_balances(rt: Runtime, oracle: Oracle, accounts: Sequence[int], echo: Echo) -> list[str]:
    """Reads of a few accounts in the partial ``balances``, printed: the first fills their
    holes with an upquery, the second is a hit, then one is evicted and read again (an upquery
    that gives the same value). Each is checked against the oracle; returns the mismatches."""
    chosen = list(accounts)
    bad: list[str] = []
    first = rt.lookup("balances", chosen)
    echo(f"  lookup {chosen} {describe_lookup(first)}")
    again = rt.lookup("balances", chosen)
    echo(f"  lookup {chosen} again {describe_lookup(again)}")
    gone = rt.evict("balances", chosen[:1])
    echo(f"  evict {chosen[:1]}: {gone} turned into holes")
    back = rt.lookup("balances", chosen[:1])
    echo(f"  lookup {chosen[:1]} {describe_lookup(back)}")
    for found, keys in ((first, chosen), (again, chosen), (back, chosen[:1])):
        bad += check_lookup(found, oracle, keys)
    before = [r for r in first.rows if r["account_id"] == chosen[0]]
    if back.rows != before:
        bad.append(f"account {chosen[0]} read again after its eviction: {back.rows}, {before}")
    return bad


def verify_outputs(
    rt: Runtime, oracle: Oracle, epochs: int, accounts: Sequence[int] | None = None
) -> list[str]:
    """Every stage of the pipeline at every epoch compared with the oracle; one line per
    mismatch. The output of a partial stage holds only the keys present when the epoch ran:
    each of its rows must be the oracle's. Then lookups of ``accounts`` (default: a few the
    oracle picks) in ``balances`` as of every epoch must equal the oracle's balances."""
    bad: list[str] = []
    for stage in ORACLE_SQL:
        if stage not in rt.pipeline.stages:  # bank without rings
            continue
        partial = rt.pipeline.stage(stage).partial is not None
        for epoch in range(epochs):
            columns, expected = oracle.expected(stage, epoch)
            got = _rows(rt.read_arrow(stage, epoch), columns)
            if partial:
                wrong = [row for row in got if row not in expected]
                if wrong:
                    bad.append(f"{stage} epoch {epoch}: {len(wrong)} of {len(got)} rows wrong")
            elif got != expected:
                bad.append(f"{stage} epoch {epoch}: {len(got)} rows, oracle {len(expected)}")
    for stage in QUARANTINE_SQL:
        if stage not in rt.pipeline.stages or not rt.pipeline.expectations(stage):
            continue  # a pipeline of some of bank's stages, or its validations unwritten
        for epoch in range(epochs):
            columns, expected = oracle.expected(stage, epoch, quarantine=True)
            got = _rows(rt.read_arrow(stage, epoch, quarantine=True), columns)
            if got != expected:
                bad.append(
                    f"{stage} epoch {epoch} quarantine: {len(got)} rows, oracle {len(expected)}"
                )
    return bad + verify_balances(rt, oracle, epochs, accounts)


def _rows(table: pa.Table, columns: Sequence[str]) -> list[tuple[Any, ...]]:
    """``table``'s rows of ``columns``, sorted as the oracle sorts them (NULLs first)."""
    return sorted(
        collected_rows(table, columns),
        key=lambda row: tuple((v is None, "" if v is None else v) for v in row),
    )


def verify_balances(
    rt: Runtime, oracle: Oracle, epochs: int, accounts: Sequence[int] | None = None
) -> list[str]:
    """Lookups of ``accounts`` in ``balances`` as of each epoch against the oracle (the first
    fills the holes among them); one line per mismatch."""
    chosen = list(accounts) if accounts is not None else oracle.some_accounts()
    bad: list[str] = []
    for epoch in range(epochs):
        found = rt.lookup("balances", chosen, as_of=epoch)
        got = sorted((r["account_id"], r["balance_cents"], r["movements"]) for r in found.rows)
        expected = oracle.balances_as_of(chosen, epoch)
        if got != expected:
            bad.append(
                f"balances of accounts {chosen} as of epoch {epoch}: {got}, oracle {expected}"
            )
    return bad
