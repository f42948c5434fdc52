"""Removing the data of attempts that were never committed (killed or lost runs)."""

from __future__ import annotations

from pathlib import Path

from pipelines.run.kinds import run_of
from pipelines.run.storage import DataStore
from pipelines.stages.pipeline import Pipeline
from progress.ledger import Ledger


def collect_garbage(
    pipeline: Pipeline, ledger: Ledger, store: DataStore, older_than: float
) -> list[Path]:
    """Remove the pipeline's attempt directories older than ``older_than`` seconds that no
    current message names, no run of a live process is writing, and no stage can resume from
    (an iterative stage's rounds); returns those removed."""
    p = pipeline.name
    live = ledger.live_paths(p)
    running = {path for path in live if path.startswith("attempt=")}
    keep = [path for path in live if not path.startswith("attempt=")]
    for stage in pipeline.stages.values():
        keep += run_of(stage).resumable_paths(stage, ledger, p)
    keep += [
        str(d) for d in (store.root / p).glob("*/port=*/epoch=*/**/attempt=*") if d.name in running
    ]
    return store.collect_garbage(p, keep, older_than=older_than)
