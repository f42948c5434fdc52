"""A pipeline's stages as Dagster assets: one asset per stage, its edges as asset dependencies.

All stages of a pipeline share one subsettable multi-asset, so one run can materialize several
stages of one epoch, upstream first. Sources are external assets in the same group, so the asset
graph shows the whole lineage.

What a selected stage does depends on who asked:

- in a run the frontier sensor requested, the stage runs through ``Runtime.run_stage``: a stage
  already done reports the message the ledger holds, and a done stage whose input was revised
  since is revised;
- in any other run (a partition backfill from the UI, GraphQL or the CLI, or "Materialize" on a
  partition) it is backfilled through ``Runtime.backfill``: a done epoch is revised with the
  current code and inputs (its downstream outputs become stale, and the frontier sensor re-runs
  those the backfill does not cover), an epoch not run yet is run. A stateful stage revised from
  an earlier epoch of the same backfill was recomputed then, and is not recomputed again.

Either way, a stage that is not ready fails the run at once, naming who holds the epoch. A
partial stage's materialization also shows its state (``dagster_project.metadata``).
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

import dagster as dg

from dagster_project.annotations import resolved
from dagster_project.checks import check_spec, check_stage
from dagster_project.columns import spark_table_schema
from dagster_project.delays import delay_notes, delayed_inputs
from dagster_project.expectations import check_results, expectation_specs
from dagster_project.metadata import (
    epoch_time_metadata,
    input_frontiers,
    materialized,
    sink_metadata,
    state_metadata,
)
from dagster_project.names import (
    BACKFILL_TAG,
    EPOCH_TAG,
    LEDGER_CHECK,
    assets_name,
    key_stage,
    stage_key,
)
from dagster_project.partitions import epoch_key, epoch_partitions, key_epoch
from dagster_project.resources import (
    LedgerResource,
    SparkResource,
    StateStoreResource,
    build_runtime,
)
from pipelines.errors import BackfillIncompleteError, PipelineError, StageNotReadyError
from pipelines.run.runtime import RunResult, RunStatus, Runtime
from pipelines.run.sinks import sink_target
from pipelines.stages.kinds import SinkStage
from pipelines.stages.pipeline import Pipeline, Stage
from progress import faults
from progress.faults import FaultPoint
from progress.ledger import Ledger

KINDS = {"spark"}

POOL = "spark"
"""The Dagster concurrency pool of every stage run: the instance's limit on it (``dagster.yaml``,
2 by default) caps how many runs use Spark at once."""

Event = dg.MaterializeResult | dg.AssetCheckResult  # type: ignore[type-arg]


def lineage(pipeline: Pipeline, stage: Stage) -> list[dg.AssetKey]:
    """The asset dependencies of ``stage`` (a feedback stage leaves out the edge that closes
    its loop: Dagster's asset graph has no cycles)."""
    return [stage_key(pipeline.name, upstream) for upstream in stage.lineage()]


def description(pipeline: Pipeline, stage: Stage) -> str:
    """What the asset page says of a stage: its function's docstring, its kind, and how its
    partitions map where a delay shifts them (``dagster_project.delays``)."""
    doc = inspect.getdoc(stage.code) if stage.code is not None else None
    return "\n\n".join([*([doc] if doc else []), stage.describe(), *delay_notes(pipeline, stage)])


def definition_metadata(pipeline: Pipeline, stage: Stage) -> dict[str, Any]:
    """The stage's kind and delay, the partition offsets of its delayed inputs, its declared
    columns (``dagster/column_schema``) and where its function is defined
    (``dagster/code_references``)."""
    out: dict[str, Any] = {"stage_kind": stage.kind, "delay": stage.delay}
    offsets = delayed_inputs(pipeline, stage)
    if offsets:
        out["partition_offsets"] = offsets
    if stage.workers:
        out["workers"] = stage.workers
    if not stage.materialize:  # its partitions commit a message with no data
        out["materialized"] = False
    if stage.schema is not None:
        out["dagster/column_schema"] = spark_table_schema(stage.schema)
    with warnings.catch_warnings():  # beta in Dagster 1.13; the UI shows it as it is
        warnings.simplefilter("ignore", dg.BetaWarning)
        reference = code_reference(stage.code) if stage.code is not None else None
        if reference is not None:
            references = dg.CodeReferencesMetadataValue(code_references=[reference])
            out["dagster/code_references"] = references
    return out


def code_reference(fn: Callable[..., object]) -> dg.LocalFileCodeReference | None:
    """The file and line where ``fn`` is defined (``None`` for what has no source file)."""
    try:
        path = inspect.getsourcefile(fn)
        _, line = inspect.getsourcelines(fn)
    except (OSError, TypeError):
        return None
    if path is None:
        return None
    label = getattr(fn, "__qualname__", None)
    return dg.LocalFileCodeReference(
        file_path=str(Path(path).resolve()), line_number=line, label=label
    )


def stage_specs(pipeline: Pipeline) -> list[dg.AssetSpec]:
    """One spec per stage that runs (not sources), with its dependencies."""
    partitions = epoch_partitions(pipeline.name)
    return [
        dg.AssetSpec(
            stage_key(pipeline.name, stage.name),
            deps=lineage(pipeline, stage),
            description=description(pipeline, stage),
            group_name=pipeline.name,
            kinds=KINDS,
            partitions_def=partitions,
            metadata=definition_metadata(pipeline, stage),
        )
        for stage in pipeline.stages.values()
        if not stage.is_source
    ]


def source_specs(pipeline: Pipeline) -> list[dg.AssetSpec]:
    """The pipeline's sources as external assets: fed by their workers' ``send``, never run."""
    partitions = epoch_partitions(pipeline.name)
    return [
        dg.AssetSpec(
            stage_key(pipeline.name, stage.name),
            description=description(pipeline, stage),
            group_name=pipeline.name,
            kinds=KINDS,
            partitions_def=partitions,
            metadata=definition_metadata(pipeline, stage),
        )
        for stage in pipeline.stages.values()
        if stage.is_source
    ]


def stage_assets(pipeline: Pipeline) -> dg.AssetsDefinition:
    """The multi-asset that runs the selected stages of one epoch, upstream first."""
    stages = [s.name for s in pipeline.stages.values() if not s.is_source]

    def run_stages(
        context: dg.AssetExecutionContext,
        spark: SparkResource,
        ledger: LedgerResource,
        state: StateStoreResource,
    ) -> Iterator[Event]:
        yield from StageRun(context, pipeline, spark, ledger, state).events()

    return dg.multi_asset(
        name=assets_name(pipeline.name),
        specs=stage_specs(pipeline),
        check_specs=[check_spec(pipeline.name, s) for s in stages] + expectation_specs(pipeline),
        can_subset=True,
        partitions_def=epoch_partitions(pipeline.name),
        pool=POOL,
    )(resolved(run_stages))


class StageRun:
    """One Dagster run's work: the selected stages of one epoch, and their ledger checks."""

    def __init__(
        self,
        context: dg.AssetExecutionContext,
        pipeline: Pipeline,
        spark: SparkResource,
        ledger: LedgerResource,
        state: StateStoreResource,
    ) -> None:
        self.context = context
        self.pipeline = pipeline
        self.resources = (spark, ledger, state)
        self.ledger: Ledger = ledger.ledger()
        self.epoch = key_epoch(context.partition_key)
        tags = context.run.tags
        self.backfills = EPOCH_TAG not in tags
        """Whether this run backfills its stages: any run the frontier sensor did not request."""
        self.backfill_id = tags.get(BACKFILL_TAG)
        order = pipeline.graph().depths()
        p = pipeline.name
        self.stages = sorted(
            (key_stage(p, k) for k in context.selected_asset_keys), key=lambda s: (order[s], s)
        )
        self.selected_checks = frozenset(context.selected_asset_check_keys)
        checked = {
            key_stage(p, k.asset_key) for k in self.selected_checks if k.name == LEDGER_CHECK
        }
        self.checked = sorted(checked, key=lambda s: (order[s], s))

    def events(self) -> Iterator[Event]:
        """Materialize the selected stages upstream first, then check the ledger for each stage
        that materialized or whose check was asked for on its own. A stage that fails stops
        the run after the checks of the stages before it."""
        failure: dg.Failure | None = None
        done: list[str] = []
        if self.stages:
            runtime = self._runtime()
            for stage in self.stages:
                try:
                    events = list(self._materialize(runtime, stage))
                except dg.Failure as err:
                    failure = err
                    yield from self._expected(runtime, stage)  # a fail expectation stopped it?
                    break
                yield from events
                yield from self._expected(runtime, stage)
                done.append(stage)
        alone = [s for s in self.checked if s not in self.stages]
        to_check = [s for s in self.checked if s in done] + alone
        if to_check:
            verify = self.ledger.verify()  # one recount of the ledger for every check
            for stage in to_check:
                found = check_stage(self.ledger, self.pipeline, stage, self.epoch, verify)
                yield found.result(self.pipeline.name)
        if failure is not None:
            raise failure

    def _expected(self, runtime: Runtime, stage: str) -> list[dg.AssetCheckResult]:
        """The results of the stage's expectations at this epoch (its last attempt's)."""
        if not self.pipeline.expectations(stage):
            return []
        found = runtime.expectations(stage, self.epoch)
        return check_results(self.pipeline, stage, found, self.selected_checks)

    def _runtime(self) -> Runtime:
        """The run's runtime, with every committed sink epoch published first (a run killed
        between a sink's commit and its publish left one unpublished)."""
        spark, ledger, state = self.resources
        runtime = build_runtime(self.pipeline, spark=spark, ledger=ledger, state=state)
        runtime.publish_sinks()
        return runtime

    def _materialize(self, runtime: Runtime, stage: str) -> Iterator[Event]:
        # A backfill holds a stateful stage from its check of what this backfill already did
        # until the materializations of what it recomputed are recorded.
        with self._exclusive(runtime, stage):
            yield from self._results(runtime, stage)

    def _exclusive(self, runtime: Runtime, stage: str) -> AbstractContextManager[None]:
        return runtime.exclusive(stage) if self.backfills else nullcontext()

    def _results(self, runtime: Runtime, stage: str) -> Iterator[Event]:
        p = self.pipeline.name
        frontier = input_frontiers(self.ledger.tracker(p), self.pipeline.stage(stage))
        key = stage_key(p, stage)
        for result in self._run(runtime, stage):
            here = result.epoch == self.epoch
            done = materialized(self.ledger, self.pipeline, result, frontier if here else ())
            if here:
                self.context.log.info(result.describe())
                metadata = done.metadata() | epoch_time_metadata(
                    runtime.epoch_times(stage, self.epoch)
                )
                spec = self.pipeline.stage(stage)
                if spec.partial is not None:
                    metadata |= state_metadata(runtime.state_info(stage))
                if isinstance(spec, SinkStage):
                    metadata |= sink_metadata(sink_target(spec, p, runtime.home))
                faults.reach(FaultPoint.BEFORE_MATERIALIZATION)
                yield dg.MaterializeResult(
                    asset_key=key, metadata=metadata, data_version=done.data_version()
                )
            else:  # a stateful stage revised from this epoch on: its later epochs changed too
                self.context.log.info(f"{result.describe()} (carried from epoch {self.epoch})")
                self.context.log_event(
                    dg.AssetMaterialization(
                        key, partition=epoch_key(result.epoch), metadata=done.metadata()
                    )
                )

    def _run(self, runtime: Runtime, stage: str) -> list[RunResult]:
        try:
            if self.backfills:
                by = self._recomputed_by(runtime, stage)
                if by is not None:
                    self.context.log.info(
                        f"{stage} epoch {self.epoch} was recomputed by run {by} of this backfill "
                        "(a stateful stage is revised from its earliest epoch on)"
                    )
                    return [RunResult(stage, self.epoch, RunStatus.DONE_ALREADY)]
                return runtime.backfill(stage, [self.epoch], downstream=False)
            result = runtime.run_stage(stage, self.epoch)
            if result.status is RunStatus.DONE_ALREADY and (stage, self.epoch) in runtime.stale():
                return runtime.revise(stage, [self.epoch])
        except StageNotReadyError as err:
            raise self._not_ready(stage, err.holds) from err
        except BackfillIncompleteError as err:  # the backfill of this one epoch left it
            raise self._not_ready(stage, err.left.get(self.epoch, ())) from err
        except PipelineError as err:
            raise dg.Failure(
                description=str(err), metadata={"stage": stage, "epoch": self.epoch}
            ) from err
        return [result]

    def _not_ready(self, stage: str, holds: Sequence[str]) -> dg.Failure:
        """The failure of a stage whose epoch is not ready, naming who holds it."""
        return dg.Failure(
            description=f"stage {stage!r} is not ready for epoch {self.epoch}: "
            + "; ".join(holds or ["its input is not complete"]),
            metadata={"stage": stage, "epoch": self.epoch, "holds": list(holds)},
            allow_retries=False,
        )

    def _recomputed_by(self, runtime: Runtime, stage: str) -> str | None:
        """The run of this backfill that already recomputed this epoch of a stateful stage
        (revising an earlier epoch recomputes the later ones), unless it is stale since."""
        if self.backfill_id is None or not self.pipeline.stage(stage).holds_state:
            return None
        instance = self.context.instance
        found = instance.fetch_materializations(
            dg.AssetRecordsFilter(
                asset_key=stage_key(self.pipeline.name, stage),
                asset_partitions=[epoch_key(self.epoch)],
            ),
            limit=1,
            ascending=False,
        ).records
        if not found or found[0].run_id == self.context.run.run_id:
            return None
        run = instance.get_run_by_id(found[0].run_id)
        if run is None or run.tags.get(BACKFILL_TAG) != self.backfill_id:
            return None
        if (stage, self.epoch) in runtime.stale():
            return None
        return str(run.run_id)


def stage_asset_keys(pipeline: Pipeline) -> list[dg.AssetKey]:
    return [stage_key(pipeline.name, s.name) for s in pipeline.stages.values() if not s.is_source]
