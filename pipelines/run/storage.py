"""The data plane: every run writes a fresh attempt directory; the ledger decides which is seen.

    {root}/{pipeline}/{stage}/port={port}/epoch={epoch:012d}/attempt={attempt}/part-*.parquet

An attempt directory is never written twice and never overwritten; it becomes visible only when
the ledger commits the progress batch that names it. Directories of attempts that were never
committed (a killed run, a lost race) are removed by ``collect_garbage``.
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from collections.abc import Iterable
from pathlib import Path

from pipelines.spark._internals import missing_file
from pipelines.spark.footers import Footers, rows_and_bytes
from progress import Time
from progress.timestamp import time_directory


def new_attempt() -> str:
    """A fresh attempt id: sortable by creation time, unique across processes."""
    return f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:12]}"


def runtime_home(ledger_file: Path) -> Path:
    """A runtime's home: the directory of its ledger file (absolute). The state store
    (``state.duckdb``) lives there unless given elsewhere, and a sink's relative path is
    resolved against it, never against the process's working directory."""
    return Path(ledger_file).resolve().parent


def link_or_copy(source: str, target: str) -> None:
    """A hard link to a committed file (attempts are immutable: no bytes copied), or a copy
    where the path is on another file system."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


class DataStore:
    """Where a pipeline's messages live on disk."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root).resolve()

    def attempt_dir(self, pipeline: str, stage: str, port: int, t: Time, attempt: str) -> Path:
        return (
            self.root / pipeline / stage / f"port={port}" / time_directory(t) / f"attempt={attempt}"
        )

    def unseen(self, err: BaseException) -> tuple[str, str] | None:
        """When ``err`` is a Spark job's failure to find a file under the root that this process
        (the driver) sees: the file, and why (an executor does not see the root); else None."""
        path = missing_file(err)
        if path is None or not path.startswith(f"{self.root}/") or not os.path.exists(path):
            return None
        return path, (
            f"cannot read {path}: an executor does not see the data root {self.root} (it must "
            "be on storage every executor mounts at the same path as the driver)"
        )

    @staticmethod
    def stats(path: Path, footers: Footers | None = None) -> tuple[int, int]:
        """Rows and bytes of a written attempt, from the Parquet footers (no Spark job)."""
        return rows_and_bytes(path, footers)

    def collect_garbage(
        self, pipeline: str, keep: Iterable[str], *, older_than: float = 3600.0
    ) -> list[Path]:
        """Remove attempt directories of ``pipeline`` that are not in ``keep`` (committed or
        still being written) and were last touched more than ``older_than`` seconds ago."""
        kept = {str(Path(p).resolve()) for p in keep}
        cutoff = time.time() - older_than
        removed: list[Path] = []
        for attempt in sorted((self.root / pipeline).glob("*/port=*/epoch=*/**/attempt=*")):
            if str(attempt.resolve()) in kept or attempt.stat().st_mtime > cutoff:
                continue
            shutil.rmtree(attempt, ignore_errors=True)
            removed.append(attempt)
        return removed
