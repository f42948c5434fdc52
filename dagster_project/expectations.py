"""A stage's expectations as Dagster asset checks, one per expectation, per partition.

Each expectation (``pipelines.stages.expectations``) is an asset check on its stage's asset,
partitioned like the asset (Dagster 1.13's ``AssetCheckSpec(partitions_def=...)``, in
preview): the UI shows its result per epoch. A ``fail`` expectation's check is blocking. The
result of an epoch is what the ledger recorded for the stage's last attempt at that epoch: the
committed one, or the run a ``fail`` expectation stopped.
"""

from __future__ import annotations

import warnings
from collections.abc import Collection, Sequence

import dagster as dg

from dagster_project.names import LEDGER_CHECK, check_key, stage_key
from dagster_project.partitions import epoch_partitions
from pipelines.errors import PipelineDefinitionError
from pipelines.run.expectations import ExpectationResult
from pipelines.stages.expectations import Expectation, OnFail
from pipelines.stages.pipeline import Pipeline


def expectation_specs(pipeline: Pipeline) -> list[dg.AssetCheckSpec]:
    """One partitioned check per expectation of a stage that runs (not of a source)."""
    specs = []
    for e in pipeline.expectations():
        if pipeline.stage(e.stage).is_source:
            continue
        if e.name == LEDGER_CHECK:
            raise PipelineDefinitionError(
                pipeline.name,
                e.stage,
                f"an expectation may not be named {LEDGER_CHECK!r}: the stage's ledger check "
                "in Dagster has that name",
                argument="name",
            )
        with warnings.catch_warnings():  # partitioned checks are a preview in Dagster 1.13
            warnings.simplefilter("ignore", dg.PreviewWarning)
            specs.append(
                dg.AssetCheckSpec(
                    e.name,
                    asset=stage_key(pipeline.name, e.stage),
                    description=f"Expectation ({e.on_fail.value} on failing rows): " + e.describe(),
                    blocking=e.on_fail is OnFail.FAIL,
                    partitions_def=epoch_partitions(pipeline.name),
                    metadata={"condition": e.describe(), "on_fail": e.on_fail.value},
                )
            )
    return specs


def check_keys(pipeline: Pipeline, stage: str) -> list[dg.AssetCheckKey]:
    """The checks of a stage's asset: the ledger's, then one per expectation."""
    key = stage_key(pipeline.name, stage)
    return [check_key(pipeline.name, stage)] + [
        dg.AssetCheckKey(key, e.name) for e in pipeline.expectations(stage)
    ]


def last_attempt(results: Sequence[ExpectationResult]) -> list[ExpectationResult]:
    """The results of the last attempt among ``results`` (of one stage and epoch)."""
    if not results:
        return []
    attempt = max(results, key=lambda r: r.recorded_at).attempt
    return [r for r in results if r.attempt == attempt]


def check_results(
    pipeline: Pipeline,
    stage: str,
    results: Sequence[ExpectationResult],
    selected: Collection[dg.AssetCheckKey],
) -> list[dg.AssetCheckResult]:
    """The check result of each selected expectation of ``stage`` found in ``results`` (the
    ledger's, for one epoch)."""
    found = {r.expectation: r for r in last_attempt(results)}
    key = stage_key(pipeline.name, stage)
    return [
        _result(key, e, found[e.name])
        for e in pipeline.expectations(stage)
        if e.name in found and dg.AssetCheckKey(key, e.name) in selected
    ]


def _result(key: dg.AssetKey, e: Expectation, r: ExpectationResult) -> dg.AssetCheckResult:
    """Passed when no row failed, or when the failing rows were dropped: the asset (what was
    committed) then meets the expectation, and the metadata counts what was dropped."""
    stops = e.on_fail is OnFail.FAIL
    dropped = e.on_fail is OnFail.DROP and not r.passed
    said = f"{r.rows_failing:,} of {r.rows_checked:,} rows dropped into the quarantine"
    return dg.AssetCheckResult(
        passed=r.passed or dropped,
        asset_key=key,
        check_name=e.name,
        severity=dg.AssetCheckSeverity.ERROR if stops else dg.AssetCheckSeverity.WARN,
        description=said if dropped else (None if r.passed else r.describe()),
        metadata={
            "epoch": dg.MetadataValue.text(str(r.epoch)),
            "rows_checked": r.rows_checked,
            "rows_failing": r.rows_failing,
            "action": r.action.value,
            "attempt": r.attempt,
            "committed": r.committed,
        },
    )
