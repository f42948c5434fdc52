"""The sentences shown to people about who holds an epoch back: written once, here.

Each function returns one clause, lower-case and without a final stop, so a caller can list
it (``- source card_payments, worker 2, still holds epoch 7``) or make a sentence of it.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence

from progress.timestamp import Time, describe_time


def source_holds(source: str, workers: Sequence[int], time: Time) -> str:
    """Input workers of ``source`` that still hold ``time`` (one or several).

    >>> source_holds("card_payments", [2], 7)
    'source card_payments, worker 2, still holds epoch 7'
    >>> source_holds("card_payments", [1, 2], 7)
    'source card_payments, workers 1, 2, still hold epoch 7'
    """
    when = describe_time(time)
    if len(workers) == 1:
        return f"source {source}, worker {workers[0]}, still holds {when}"
    return f"source {source}, workers {', '.join(map(str, workers))}, still hold {when}"


def source_count_holds(source: str, count: int, time: Time) -> str:
    """``count`` capabilities of ``source`` at ``time`` that no recorded worker accounts for.

    >>> source_count_holds("card_payments", 3, 7)
    'source card_payments, 3 worker(s), still holds epoch 7'
    """
    return f"source {source}, {count} worker(s), still holds {describe_time(time)}"


def stage_holds(stage: str, time: Time) -> str:
    """A stage that still holds a capability at ``time``.

    >>> stage_holds("totals", 3)
    'stage totals still holds epoch 3'
    """
    return f"stage {stage} still holds {describe_time(time)}"


def stage_not_run(stage: str, time: Time, waiting: int) -> str:
    """An upstream stage whose run of ``time`` is still to come, its input waiting.

    >>> stage_not_run("validate", 3, 2)
    'stage validate has not run epoch 3 yet (2 message(s) waiting)'
    """
    return f"stage {stage} has not run {describe_time(time)} yet ({waiting} message(s) waiting)"


def must_first_run(stage: str, time: Time, waiting: int) -> str:
    """The stage asked about must first run an earlier ``time`` whose input waits.

    >>> must_first_run("balances", 3, 2)
    'balances must first run epoch 3 (2 message(s) waiting)'
    """
    return f"{stage} must first run {describe_time(time)} ({waiting} message(s) waiting)"


def ready_not_run(stage: str, time: Time) -> str:
    """The stage asked about is ready for ``time`` and has not run it yet.

    >>> ready_not_run("balances", 3)
    'balances is ready for epoch 3 and has not run it yet'
    """
    return f"{stage} is ready for {describe_time(time)} and has not run it yet"


def stale_output(stage: str, time: Time) -> str:
    """A stage's output at ``time`` that must be computed again: what it read was revised.

    >>> stale_output("valid", 3)
    'stage valid epoch 3 is stale: its input was corrected'
    """
    return f"stage {stage} {describe_time(time)} is stale: its input was corrected"


def read_recorded(stage: str, time: Time) -> str:
    """A read that waits for ``time`` was recorded as a pending upquery.

    >>> read_recorded("sum", 3)
    'the read is recorded as a pending upquery of sum: it is filled once sum has processed epoch 3'
    """
    return (
        f"the read is recorded as a pending upquery of {stage}: "
        f"it is filled once {stage} has processed {describe_time(time)}"
    )


def reads_wait(stage: str, keys: int, time: Time, holds: Sequence[str]) -> str:
    """Pending reads of ``keys`` keys of ``stage`` as of ``time``, and what holds that epoch.

    >>> reads_wait("sums", 2, 3, ["source cards, worker 2, still holds epoch 3"])
    '2 pending read(s) of sums as of epoch 3 wait: source cards, worker 2, still holds epoch 3'
    """
    return f"{keys} pending read(s) of {stage} as of {describe_time(time)} wait: {'; '.join(holds)}"


def not_registered(pipeline: str) -> str:
    """A pipeline the ledger does not know yet, as what a wait on it waits for.

    >>> not_registered("shop")
    'pipeline shop is not registered: nothing was sent to it yet'
    """
    return f"pipeline {pipeline} is not registered: nothing was sent to it yet"


def no_such_stage(stage: str, known: Sequence[str]) -> str:
    """A stage name that is not in the pipeline, with the closest known names.

    >>> no_such_stage("vaild", ["orders", "valid", "totals"])
    "no such stage (did you mean 'valid'?); its stages: orders, valid, totals"
    >>> no_such_stage("x", [])
    'no such stage; it has no stages'
    """
    close = difflib.get_close_matches(stage, list(known), n=2, cutoff=0.6)
    hint = f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
    stages = f"its stages: {', '.join(known)}" if known else "it has no stages"
    return f"no such stage{hint}; {stages}"


def worker_problem(worker: object, workers: int) -> str | None:
    """What is wrong with ``worker`` as the index of one of ``workers`` input workers (None:
    nothing): the one check of a worker index, wherever one is given.

    >>> worker_problem(1, 2) is None
    True
    >>> worker_problem(2, 2)
    'there is no worker 2 (workers: 0 .. 1)'
    >>> worker_problem("0", 1)
    "there is no worker '0' (workers: 0 .. 0)"
    """
    if type(worker) is int and 0 <= worker < workers:
        return None
    return f"there is no worker {worker!r} (workers: 0 .. {workers - 1})"


def expectation_failed(expectation: str, failing: int, checked: int) -> str:
    """Why a ``fail`` expectation stopped a run or refused a send.

    >>> expectation_failed("region_known", 12, 20000)
    'failed expectation region_known: 12 of 20,000 rows'
    """
    return f"failed expectation {expectation}: {failing:,} of {checked:,} rows"


def failed_run(stage: str, epoch: Time, cause: str) -> str:
    """The last run of ``stage`` at ``epoch`` failed (``cause``: its error), and none has
    started since.

    >>> failed_run("by_region", 4, "ZeroDivisionError: division by zero")
    'stage by_region epoch 4 failed: ZeroDivisionError: division by zero'
    """
    return f"stage {stage} {describe_time(epoch)} failed: {cause}"


def failed_expectation(
    stage: str, epoch: Time, expectation: str, failing: int, checked: int
) -> str:
    """The last run of ``stage`` at ``epoch`` was stopped by a ``fail`` expectation.

    >>> failed_expectation("by_region", 4, "region_known", 12, 20000)
    'stage by_region epoch 4 failed expectation region_known: 12 of 20,000 rows'
    """
    return (
        f"stage {stage} {describe_time(epoch)} {expectation_failed(expectation, failing, checked)}"
    )


def behind(stage: str, epoch: Time, open_seconds: float, freshness_seconds: float) -> str:
    """A stage whose oldest open epoch has been open longer than its freshness allows.

    >>> behind("by_region", 8, 400.2, 300)
    'stage by_region is behind: epoch 8 has been open for 400s, its freshness is 300s'
    """
    return (
        f"stage {stage} is behind: {describe_time(epoch)} has been open for {open_seconds:.0f}s, "
        f"its freshness is {freshness_seconds:.0f}s"
    )
