"""What a stage's materialization records, read from the ledger: its message, its reads, timing.

Every value comes from the ledger after the run committed (or found the epoch already done),
so the Dagster event says what the ledger holds, never what the run hoped to write. A partial
stage's materialization also shows its state as the state store holds it after the run: present
keys, state rows and bytes, and the hits, misses, upqueries and evictions of its reads.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import dagster as dg

from dagster_project.columns import parquet_table_schema
from pipelines.reads.lag import EpochTimes
from pipelines.reads.lookup import StateInfo
from pipelines.run.published import SinkTarget
from pipelines.run.runtime import RunResult
from pipelines.stages.pipeline import Pipeline, Stage
from progress import Target, Time, Tracker
from progress.ledger import Ledger, MessageRecord, MessageRef
from progress.run_status import RunStatus
from progress.timestamp import time_metadata


@dataclass(frozen=True)
class InputFrontier:
    """Where one input port of a stage stood when its run was asked for."""

    port: int
    upstream: str
    frontier: tuple[Time, ...]
    """The least epochs that may still arrive at the port; empty once nothing more can."""


@dataclass(frozen=True)
class Materialized:
    """One ``(stage, epoch)`` as the ledger holds it after a run: what Dagster reports."""

    result: RunResult
    output_time: Time
    messages: tuple[MessageRecord, ...]
    """The current messages of the stage's output at ``output_time`` (one commit)."""
    attempt: str | None
    reads: tuple[MessageRef, ...]
    """The input messages, and their attempts, that the committed output read (its lineage)."""
    frontier: tuple[InputFrontier, ...]

    @property
    def rows(self) -> int:
        return sum(m.rows for m in self.messages)

    @property
    def bytes(self) -> int:
        return sum(m.bytes for m in self.messages)

    @property
    def batch_id(self) -> int | None:
        return self.messages[0].batch_id if self.messages else None

    def data_version(self) -> dg.DataVersion | None:
        """The committed attempt: it changes exactly when the stage's output at the epoch does."""
        return dg.DataVersion(self.attempt) if self.attempt else None

    def metadata(self) -> dict[str, Any]:
        r = self.result
        out: dict[str, Any] = {
            "epoch": dg.MetadataValue.int(_int(r.epoch)),
            "status": dg.MetadataValue.text(r.status.value),
            "attempt": dg.MetadataValue.text(self.attempt or "-"),
            "rows": dg.MetadataValue.int(self.rows),
            # Dagster shows this key as the asset's row count in the catalog.
            "dagster/row_count": dg.MetadataValue.int(self.rows),
            "bytes": dg.MetadataValue.int(self.bytes),
            "seconds": dg.MetadataValue.float(round(r.seconds, 3)),
            "ledger_batch": dg.MetadataValue.int(self.batch_id or 0),
            "messages": dg.MetadataValue.json([_message(m) for m in self.messages]),
            "reads": dg.MetadataValue.json(
                [
                    {
                        "stage": r.stage,
                        "port": r.port,
                        "epoch": time_metadata(r.time),
                        "attempt": r.attempt,
                    }
                    for r in self.reads
                ]
            ),
            "input_frontier": dg.MetadataValue.json(
                [
                    {
                        "port": f.port,
                        "from": f.upstream,
                        "frontier": [time_metadata(t) for t in f.frontier],
                    }
                    for f in self.frontier
                ]
            ),
        }
        if self.output_time != r.epoch:
            out["output_epoch"] = dg.MetadataValue.int(_int(self.output_time))
        if r.rounds:
            out["rounds"] = dg.MetadataValue.int(r.rounds)
        paths = [m.path for m in self.messages if m.path]
        if len(paths) == 1:
            out["path"] = dg.MetadataValue.path(paths[0])
        columns = parquet_table_schema(paths[0]) if paths else None
        if columns is not None:  # the committed output's columns, from its Parquet footer
            out["dagster/column_schema"] = columns
        return out


def state_metadata(info: StateInfo) -> dict[str, Any]:
    """A partial stage's state: present keys, state rows and bytes, what its reads found."""
    out: dict[str, Any] = {
        "present_keys": dg.MetadataValue.int(info.present_keys),
        "state_rows": dg.MetadataValue.int(info.rows),
        "state_bytes": dg.MetadataValue.int(info.bytes),
        "hits": dg.MetadataValue.int(info.hits),
        "misses": dg.MetadataValue.int(info.misses),
        "upqueries": dg.MetadataValue.int(info.upqueries),
        "evictions": dg.MetadataValue.int(info.evictions),
    }
    if info.max_keys is not None:
        out["max_keys"] = dg.MetadataValue.int(info.max_keys)
    return out


def input_frontiers(tracker: Tracker, stage: Stage) -> tuple[InputFrontier, ...]:
    """The frontier at each input port of ``stage`` in ``tracker``'s snapshot."""
    return tuple(
        InputFrontier(port, upstream, tuple(tracker.frontier(Target(stage.name, port)).elements))
        for port, upstream in enumerate(stage.inputs)
    )


def materialized(
    ledger: Ledger,
    pipeline: Pipeline,
    result: RunResult,
    frontier: Sequence[InputFrontier] = (),
) -> Materialized:
    """Read from the ledger what ``result`` left: the output message and the messages read."""
    p = pipeline.name
    stage = pipeline.stage(result.stage)
    out_time = stage.output_time(result.epoch)
    with ledger.session():
        messages = tuple(ledger.message(p, stage.name, 0, out_time))
        reads = tuple(ledger.reads(p, stage.name, result.epoch))
        attempt = result.attempt
        if attempt is None and messages:  # done already: the attempt of the run that committed
            batch = messages[0].batch_id
            runs = ledger.history(p, stage.name, result.epoch).runs
            attempt = next(
                (
                    r.attempt
                    for r in runs
                    if r.batch_id == batch and r.status is RunStatus.SUCCEEDED
                ),
                None,
            )
    return Materialized(result, out_time, messages, attempt, reads, tuple(frontier))


def _message(m: MessageRecord) -> Mapping[str, Any]:
    return {
        "stage": m.stage,
        "port": m.port,
        "epoch": time_metadata(m.time),
        "attempt": m.attempt,
        "rows": m.rows,
        "bytes": m.bytes,
        "batch": m.batch_id,
    }


def _int(t: Time) -> int:
    if not isinstance(t, int):
        raise TypeError(f"pipeline stages run at int epochs, not {t!r}")
    return t


def sink_metadata(sink: SinkTarget) -> dict[str, Any]:
    """Where a sink published the epoch: its format, its location and, for a table format,
    the table's version after the publish."""
    out: dict[str, Any] = {"format": sink.format.value, "location": sink.location}
    version = sink.version()
    if version is not None:
        out["table_version"] = version
    return out


def epoch_time_metadata(times: EpochTimes) -> dict[str, Any]:
    """When the epoch's input was complete, whether its output is final now and since when,
    and the latency between (``pipelines.reads.lag``); times in the ledger's clock."""
    out: dict[str, Any] = {"final": times.final}
    if times.input_complete_at is not None:
        out["input_complete_at"] = times.input_complete_at.isoformat(sep=" ")
    if times.final_at is not None:
        out["final_at"] = times.final_at.isoformat(sep=" ")
    if times.latency_seconds is not None:
        out["latency_seconds"] = round(times.latency_seconds, 3)
    return out
