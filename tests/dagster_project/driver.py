"""Drive a pipeline's Definitions as the Dagster daemon would, in this process.

A tick evaluates the frontier sensor on a real instance and applies the partitions it adds;
``execute`` runs one requested run in process; ``drive`` repeats both until the sensor skips.
Like the daemon, the driver launches a run key only once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import dagster as dg

from dagster_project.names import job_name, key_stage, sensor_name
from dagster_project.partitions import key_epoch


@dataclass
class Driver:
    defs: dg.Definitions
    instance: dg.DagsterInstance
    pipeline: str = "bank"
    launched: list[str] = field(default_factory=list)
    """The run keys executed so far, in order."""

    def tick(self) -> dg.SensorResult:
        """Evaluate the sensor once as the daemon does (its run requests are checked against the
        job and the partitions) and add the partitions it asks for."""
        sensor = self.defs.resolve_sensor_def(sensor_name(self.pipeline))
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
        )
        for request in result.dynamic_partitions_requests or ():
            assert isinstance(request, dg.AddDynamicPartitionsRequest)
            self.instance.add_dynamic_partitions(
                request.partitions_def_name, list(request.partition_keys)
            )
        return result

    def execute(
        self, request: dg.RunRequest, *, raise_on_error: bool = True
    ) -> dg.ExecuteInProcessResult:
        job = self.defs.resolve_job_def(job_name(self.pipeline))
        if request.run_key is not None:
            self.launched.append(request.run_key)
        return job.execute_in_process(
            instance=self.instance,
            partition_key=request.partition_key,
            asset_selection=list(request.asset_selection or ()),
            tags=dict(request.tags),
            raise_on_error=raise_on_error,
        )

    def drive(self, max_ticks: int = 20) -> dg.SkipReason:
        """Tick and run every request until a tick requests nothing; return its skip reason."""
        for _ in range(max_ticks):
            result = self.tick()
            if not result.run_requests:
                assert result.skip_reason is not None
                return result.skip_reason
            for request in result.run_requests:
                assert request.run_key not in self.launched, f"requested again: {request.run_key}"
                self.execute(request)
        raise AssertionError(f"the sensor still requests runs after {max_ticks} ticks")


def requested(result: dg.SensorResult, pipeline: str = "bank") -> list[tuple[int, set[str]]]:
    """Each run request of a tick as ``(epoch, stages)``."""
    out = []
    for request in result.run_requests or ():
        assert request.partition_key is not None
        stages = {key_stage(pipeline, k) for k in request.asset_selection or ()}
        out.append((key_epoch(request.partition_key), stages))
    return out


def skip_text(result: dg.SensorResult) -> str:
    assert not result.run_requests, f"requests: {requested(result)}"
    assert result.skip_reason is not None
    return result.skip_reason.skip_message or ""
