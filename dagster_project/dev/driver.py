"""Drive a pipeline's Definitions as the Dagster daemon would, in this process.

A tick evaluates a sensor (the frontier sensor unless told) on a real instance and applies the
partitions it adds and the asset events it reports (observations of source partitions);
``execute`` runs one requested run in process (of the stages of an epoch, or an upquery run),
on that instance, tagged as the daemon tags a sensor's runs; ``drive`` repeats both until the
sensor skips. Like the daemon, the driver
launches a run key only once: a sensor that asks for the same run key again is an error here.

The runs, partitions, materializations and checks land in the instance, so the Dagster UI on
that instance shows them. The demo (``python -m dagster_project.dev.demo``) and the tests use it:

    driver = Driver(defs, instance)
    reason = driver.drive()  # why the sensor has nothing more to run, in plain words
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import dagster as dg

from dagster_project.names import (
    UPQUERY_TAG,
    clock_sensor_name,
    job_name,
    key_stage,
    upquery_job_name,
    upquery_sensor_name,
)
from dagster_project.names import sensor_name as frontier_name
from dagster_project.partitions import key_epoch

RUN_KEY_TAG = "dagster/run_key"
"""Dagster's run tag for the run key a sensor requested the run under."""
SENSOR_NAME_TAG = "dagster/sensor_name"
"""Dagster's run tag for the sensor that requested the run."""


class DriveError(RuntimeError):
    """The sensor asked for a run key again, kept asking for runs, or a run failed."""


@dataclass(frozen=True)
class LaunchedRun:
    """One run the driver executed: which epoch and stages (for an upquery run, no epoch and
    the partial stage it filled), and how it ended."""

    run_id: str
    run_key: str | None
    epoch: int | None
    stages: tuple[str, ...]
    success: bool
    seconds: float
    error: str | None = None
    """Why the run failed: the first line of its failing step's error."""

    def describe(self) -> str:
        if self.epoch is None:
            what = f"run {self.run_id[:8]} upquery of {', '.join(self.stages)}"
        else:
            what = f"run {self.run_id[:8]} epoch {self.epoch} ({', '.join(self.stages)})"
        if self.success:
            return f"{what}: succeeded in {self.seconds:.1f}s"
        return f"{what}: FAILED after {self.seconds:.1f}s: {self.error}"


@dataclass
class Driver:
    """The frontier sensor of ``pipeline`` and its runs, on ``instance``, in this process."""

    defs: dg.Definitions
    instance: dg.DagsterInstance
    pipeline: str = "bank"
    console_log_level: str = "WARNING"
    """What a run prints on the console (its events all go to the instance, for the UI)."""
    runs: list[LaunchedRun] = field(default_factory=list)
    """Every run executed so far, in order."""

    @property
    def launched(self) -> list[str]:
        """The run keys executed so far, in order."""
        return [r.run_key for r in self.runs if r.run_key is not None]

    def tick(self, sensor_name: str | None = None) -> dg.SensorResult:
        """Evaluate a sensor (by default the frontier sensor) once as the daemon does (its run
        requests are checked against the job and the partitions) and add (or delete) the
        partitions it asks for."""
        sensor = self.defs.resolve_sensor_def(sensor_name or frontier_name(self.pipeline))
        # A sensor evaluated directly gets only the resources its context is given.
        context = dg.build_sensor_context(
            instance=self.instance,
            instance_ref=self.instance.get_ref(),
            definitions=self.defs,
            resources=dict(self.defs.resources or {}),
        )
        with context:
            data = sensor.evaluate_tick(context)
        result = dg.SensorResult(
            run_requests=data.run_requests,
            skip_reason=data.skip_message,
            dynamic_partitions_requests=data.dynamic_partitions_requests,
            asset_events=data.asset_events,
        )
        for request in result.dynamic_partitions_requests or ():
            name, keys = request.partitions_def_name, list(request.partition_keys)
            if isinstance(request, dg.AddDynamicPartitionsRequest):
                self.instance.add_dynamic_partitions(name, keys)
            else:
                for key in keys:
                    self.instance.delete_dynamic_partition(name, key)
        for event in result.asset_events:
            self.instance.report_runless_asset_event(event)
        return result

    def execute(
        self, request: dg.RunRequest, *, raise_on_error: bool = True
    ) -> dg.ExecuteInProcessResult:
        """Run one requested run in process: a run of the stages of an epoch (the frontier
        sensor's) or an upquery run (the upquery sensor's). With ``raise_on_error``, a failed
        run raises ``DriveError`` naming the run and its error (it is recorded in ``runs``
        either way)."""
        upquery = request.job_name == upquery_job_name(self.pipeline)
        if request.partition_key is None and not upquery:
            raise DriveError(f"run request {request.run_key!r} names no epoch partition")
        job = self.defs.resolve_job_def(request.job_name or job_name(self.pipeline))
        tags = dict(request.tags)
        if request.run_key is not None:
            sensor = upquery_sensor_name if upquery else frontier_name
            tags |= {RUN_KEY_TAG: request.run_key, SENSOR_NAME_TAG: sensor(self.pipeline)}
        logs = {"loggers": {"console": {"config": {"log_level": self.console_log_level}}}}
        started = time.perf_counter()
        if upquery:
            result = job.execute_in_process(
                run_config={**dict(request.run_config), **logs},
                instance=self.instance,
                tags=tags,
                raise_on_error=False,
            )
            stages: tuple[str, ...] = (request.tags[UPQUERY_TAG],)
        else:
            result = job.execute_in_process(
                run_config=logs,
                instance=self.instance,
                partition_key=request.partition_key,
                asset_selection=list(request.asset_selection or ()),
                tags=tags,
                raise_on_error=False,
            )
            stages = tuple(key_stage(self.pipeline, k) for k in request.asset_selection or ())
        run = LaunchedRun(
            result.run_id,
            request.run_key,
            None if request.partition_key is None else key_epoch(request.partition_key),
            stages,
            result.success,
            time.perf_counter() - started,
            None if result.success else failure_line(result),
        )
        self.runs.append(run)
        if raise_on_error and not run.success:
            raise DriveError(run.describe())
        return result

    def drive(
        self,
        max_ticks: int = 20,
        on_run: Callable[[LaunchedRun], None] | None = None,
        *,
        sensor_name: str | None = None,
    ) -> dg.SkipReason:
        """Tick and run every request until a tick requests nothing; return its skip reason.
        ``sensor_name`` is the sensor to tick (default: the frontier sensor, with the epoch
        clock ticked first when the pipeline has one). ``on_run`` hears of each run as it
        ends. Raises ``DriveError`` when a run fails, when the sensor requests a run key it
        requested before, or when it still requests runs after ``max_ticks`` ticks."""
        clock = clock_sensor_name(self.pipeline)
        scheduled = sensor_name is None and any(s.name == clock for s in self.defs.sensors or ())
        for _ in range(max_ticks):
            if scheduled:  # the epoch clock opens and closes epochs first
                self.tick(clock)
            result = self.tick(sensor_name)
            if not result.run_requests:
                return result.skip_reason or dg.SkipReason()
            for request in result.run_requests:
                if request.run_key is not None and request.run_key in self.launched:
                    raise DriveError(f"the sensor requested run key {request.run_key} again")
                self.execute(request, raise_on_error=False)
                if on_run is not None:
                    on_run(self.runs[-1])
                if not self.runs[-1].success:
                    raise DriveError(self.runs[-1].describe())
        raise DriveError(f"the sensor still requests runs after {max_ticks} ticks")


def failure_line(result: dg.ExecuteInProcessResult) -> str:
    """The first line of the error of a failed run's first failing step."""
    for event in result.all_events:
        if event.event_type == dg.DagsterEventType.STEP_FAILURE:
            error = event.step_failure_data.error
            if error is not None:
                while error.cause is not None and (error.cls_name or "").startswith("Dagster"):
                    error = error.cause  # Dagster's wrapper: the user code's error is its cause
                line = error.message.strip().splitlines()[0]
                # A Failure's description says it all; other errors keep their class name.
                return line.split(": ", 1)[-1] if error.cls_name == "Failure" else line
    return "the run failed before any step failed (see its logs in the Dagster UI)"


def requested(result: dg.SensorResult, pipeline: str = "bank") -> list[tuple[int, set[str]]]:
    """Each run request of a tick as ``(epoch, stages)``."""
    out = []
    for request in result.run_requests or ():
        if request.partition_key is None:
            raise DriveError(f"run request {request.run_key!r} names no epoch partition")
        stages = {key_stage(pipeline, k) for k in request.asset_selection or ()}
        out.append((key_epoch(request.partition_key), stages))
    return out
