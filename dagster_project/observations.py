"""Source partitions as Dagster sees them: observations whose data version names the messages.

Sources are fed by their workers outside Dagster, so Dagster learns what a source partition
holds from the frontier sensor. Before it requests the runs of an epoch, the sensor observes
each source partition those runs read, when Dagster has not seen its current messages yet: the
observation's data version is a digest of their attempts. Each stage's materialization records
the version it read (Dagster's data provenance). A correction replaces a worker's messages, so
the next observation of that partition carries a new version, and Dagster shows every
partition that read the old one stale ("has a new dependency data version"), as it shows the
partitions downstream of a revised stage, until the sensor's run revises them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import dagster as dg

from dagster_project.names import stage_key
from dagster_project.partitions import epoch_key
from pipelines.stages.pipeline import Pipeline
from progress.ledger import Ledger, MessageRecord, OriginKind

DATA_VERSION_TAG = "dagster/data_version"
"""Dagster's tag for the data version an event reports."""
USER_PROVIDED_TAG = "dagster/data_version_is_user_provided"
"""Dagster's tag saying the data version is the code's own (shown as "a new data version")."""


@dataclass(frozen=True)
class SourcePartition:
    """The current messages of one source at one epoch, and the input worker of each."""

    pipeline: str
    source: str
    epoch: int
    messages: tuple[MessageRecord, ...]
    workers: Mapping[str, tuple[int | None, bool]]
    """Per message attempt: the worker that sent it, and whether it is a correction."""

    @property
    def data_version(self) -> str:
        """A digest of the current attempts: it changes exactly when the messages do."""
        attempts = sorted(m.attempt for m in self.messages)
        return hashlib.sha256(json.dumps(attempts).encode()).hexdigest()[:16]

    @property
    def corrected(self) -> tuple[int, ...]:
        """The workers whose messages here are corrections."""
        return tuple(sorted({w for w, fixed in self.workers.values() if fixed and w is not None}))

    def observation(self) -> dg.AssetObservation:
        rows = sum(m.rows for m in self.messages)
        return dg.AssetObservation(
            asset_key=stage_key(self.pipeline, self.source),
            partition=epoch_key(self.epoch),
            tags={DATA_VERSION_TAG: self.data_version, USER_PROVIDED_TAG: "true"},
            metadata={
                "epoch": dg.MetadataValue.int(self.epoch),
                "rows": dg.MetadataValue.int(rows),
                "dagster/row_count": dg.MetadataValue.int(rows),
                "corrected_workers": dg.MetadataValue.json(list(self.corrected)),
                "messages": dg.MetadataValue.json(
                    [
                        {
                            "attempt": m.attempt,
                            "worker": self.workers.get(m.attempt, (None, False))[0],
                            "correction": self.workers.get(m.attempt, (None, False))[1],
                            "rows": m.rows,
                            "batch": m.batch_id,
                        }
                        for m in self.messages
                    ]
                ),
            },
        )


def read_sources(
    ledger: Ledger, pipeline: Pipeline, work: Iterable[tuple[int, Sequence[str]]]
) -> list[SourcePartition]:
    """The source partitions that ``stages`` read at each ``epoch`` of ``work`` (in a ledger
    session: one look with the rest of the tick)."""
    wanted = sorted(
        {
            (upstream, epoch)
            for epoch, stages in work
            for stage in stages
            for upstream in pipeline.stage(stage).inputs
            if pipeline.stage(upstream).is_source
        }
    )
    p = pipeline.name
    out = []
    for source, epoch in wanted:
        history = ledger.history(p, source, epoch)
        by_batch = {
            b.batch_id: (b.worker, b.origin is OriginKind.CORRECTION) for b in history.batches
        }
        current = tuple(m for m in history.messages if m.current and m.port == 0)
        workers = {m.attempt: by_batch.get(m.batch_id, (None, False)) for m in current}
        out.append(SourcePartition(p, source, epoch, current, workers))
    return out


def new_observations(
    instance: dg.DagsterInstance, partitions: Sequence[SourcePartition]
) -> list[dg.AssetObservation]:
    """The observations of ``partitions`` whose data version differs from the latest one the
    instance holds for that partition (or that it has never observed)."""
    out = []
    by_source: dict[str, list[SourcePartition]] = {}
    for part in partitions:
        by_source.setdefault(part.source, []).append(part)
    for parts in by_source.values():
        seen = latest_versions(instance, parts[0], [epoch_key(p.epoch) for p in parts])
        out += [p.observation() for p in parts if seen.get(epoch_key(p.epoch)) != p.data_version]
    return out


def latest_versions(
    instance: dg.DagsterInstance, part: SourcePartition, keys: Sequence[str]
) -> dict[str, str | None]:
    """The data version of the latest observation of each of ``keys`` of ``part``'s source."""
    key = stage_key(part.pipeline, part.source)
    found: dict[str, str | None] = {}
    cursor = None
    while len(found) < len(keys):
        page = instance.fetch_observations(
            dg.AssetRecordsFilter(asset_key=key, asset_partitions=list(keys)),
            limit=100,
            cursor=cursor,
        )
        for record in page.records:  # newest first
            observed = record.asset_observation
            if record.partition_key is not None and observed is not None:
                found.setdefault(record.partition_key, observed.data_version)
        if not page.has_more:
            break
        cursor = page.cursor
    return found
