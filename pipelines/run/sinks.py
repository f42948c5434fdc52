"""Sinks: each committed epoch of a stage published to a user's directory, atomically, after
the commit that makes it true.

    PATH/epoch=N -> .versions/epoch=N/ATTEMPT        a relative symlink, one per epoch
    PATH/.versions/epoch=N/ATTEMPT/part-*.parquet    the committed attempt's files
    PATH/.versions/epoch=N/EARLIER/                  the version it replaced, if any
    PATH/.versions/.place                            the directory's own name (its mark's)

A sink's run writes its attempt in the data directory like any stage. Only once the ledger has
committed it does ``SinkDirectory.publish`` put its files in a version directory of its own
(hard links to the immutable attempt's files, or copies on another file system; under a
temporary name, renamed when complete) and point ``PATH/epoch=N`` at it by renaming a new
symlink over the old one: a reader of ``PATH/epoch=N`` finds the previous committed version or
the new one, whole, never a half one and never nothing. The version it replaced stays until
the epoch is published again, so a reader that opened it just before the swap still lists it
whole; older ones are removed then. (File names differ between versions: a reader that listed
the old version and opens its files through the link after the swap fails, and never mixes
two versions.) Nothing is published for a run that fails, is killed before its commit, or
finds its epoch committed by another run first.

Readers that list ``epoch=*`` folders see one version per epoch: Spark's partition discovery,
DuckDB's ``read_parquet('PATH/*/*.parquet', hive_partitioning=true)`` and pyarrow datasets
(``.versions`` is hidden from the first and the last by its leading dot, and ``*/*.parquet`` does
not reach it). DuckDB's ``**`` does not follow symlinks: it would read ``.versions`` instead.

Publishing happens while the ledger session that committed (or read) the attempt is held, so
publishes of one sink in several processes take turns, in commit order. A run killed between
its commit and its publish leaves the previous version (or no link) in place:
``publish_committed``, which ``Runtime.run()`` calls first, publishes every committed epoch
whose link names another attempt. It looks only at the epochs committed since the sink's mark
in the ledger (``progress.ledger.marks``), a few dozen at most, however long the history: a
link removed by hand from an older epoch is put back by ``Runtime.publish_sinks(recheck=True)``
(``epochgate sinks --publish``), which looks at every one.

A relative sink path is resolved against the runtime's home (the ledger's directory), never the
process's working directory; one that is empty or climbs out of the home is refused when the
sink is defined.

A sink of another format publishes the same committed epochs, in the same places, to a table
(``pipelines.run.delta_sink``); each format's target says whether it shows a committed epoch
already and publishes it (``SinkTarget``).
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pipelines.errors import PipelineError, SinkPublishError
from pipelines.run.published import Committed, SinkPlace, SinkState, SinkTarget
from pipelines.run.storage import link_or_copy
from pipelines.stages.kinds import SinkStage
from pipelines.stages.sink_formats import SinkFormat
from progress import Time
from progress.ledger import Ledger, MessageRecord

if TYPE_CHECKING:
    from pipelines.stages.pipeline import Pipeline

VERSIONS = ".versions"
"""The hidden directory of a sink's published versions, inside its path."""
PLACE = ".place"
"""A file in ``VERSIONS`` with a name of the directory's own, made by its first publish: what
the ledger keeps the sink's mark under (``SinkDirectory.reader``)."""


def sink_target(stage: SinkStage, pipeline: str, home: Path) -> SinkTarget:
    """Where ``stage`` publishes, in its format, for a runtime whose home is ``home``."""
    return _TARGETS[stage.format](stage, pipeline, home)


def named_target(pipeline: Pipeline, name: str, home: Path) -> SinkTarget:
    """Where the sink ``name`` of ``pipeline`` publishes; a stage that is not a sink is
    refused."""
    stage = pipeline.stage(name)
    if not isinstance(stage, SinkStage):
        raise PipelineError(f"stage {name!r} is a {stage.kind} stage, not a sink")
    return sink_target(stage, pipeline.name, home)


def sink_targets(pipeline: Pipeline, home: Path) -> list[SinkTarget]:
    """Where each sink of ``pipeline`` publishes."""
    stages = pipeline.stages.values()
    return [sink_target(s, pipeline.name, home) for s in stages if isinstance(s, SinkStage)]


def _parquet(stage: SinkStage, pipeline: str, home: Path) -> SinkTarget:
    return SinkDirectory(pipeline, stage.name, resolve_sink_path(stage.path, home))


def _delta(stage: SinkStage, pipeline: str, home: Path) -> SinkTarget:
    from pipelines.run.delta_sink import DeltaSink  # its library is an extra's

    return DeltaSink(pipeline, stage.name, resolve_sink_path(stage.path, home))


def _iceberg(stage: SinkStage, pipeline: str, home: Path) -> SinkTarget:
    from pipelines.run.iceberg_sink import IcebergSink  # its library is an extra's

    return IcebergSink(pipeline, stage.name, home, stage.table or "", dict(stage.catalog))


def resolve_sink_path(path: str, home: Path) -> Path:
    """Where a sink defined with ``path`` publishes: ``path`` itself when absolute (after
    ``~``), else under ``home``."""
    given = Path(path).expanduser()
    return Path(os.path.normpath(given if given.is_absolute() else home / given))


@dataclass(frozen=True)
class SinkDirectory(SinkPlace):
    """The directory one sink publishes to: an epoch link and hidden versions per epoch."""

    def link(self, epoch: Time) -> Path:
        """``PATH/epoch=N``: what readers read."""
        return self.root / f"epoch={epoch}"

    def versions(self, epoch: Time) -> Path:
        return self.root / VERSIONS / f"epoch={epoch}"

    def target(self, epoch: Time, attempt: str) -> str:
        """The link's content for ``attempt``: relative, so the directory can move."""
        return os.path.join(VERSIONS, f"epoch={epoch}", attempt)

    def published(self, epoch: Time) -> str | None:
        """The attempt ``PATH/epoch=N`` shows, or ``None`` (no link, or not one of ours)."""
        try:
            found = os.readlink(self.link(epoch))
        except OSError:  # missing, or a plain directory from before versions
            return None
        head, attempt = os.path.split(found)
        return attempt if head == os.path.join(VERSIONS, f"epoch={epoch}") else None

    def check(self, committed: Committed) -> None:
        """Any committed epoch can be published as Parquet."""

    @property
    def format(self) -> SinkFormat:
        return SinkFormat.PARQUET

    def reader(self) -> str | None:
        """The directory's own name for itself (``PLACE``, written by its first publish): a
        directory made anew at the same path is another place."""
        try:
            return f"parquet:{(self.root / VERSIONS / PLACE).read_text()}"
        except OSError:
            return None

    def version(self) -> int | None:
        """Parquet folders have no table version."""
        return None

    def shown(self, committed: Sequence[Committed]) -> list[bool]:
        return [self.published(c.epoch) == c.attempt for c in committed]

    def publish(self, committed: Committed) -> None:
        """Show ``committed``'s files at ``PATH/epoch=N`` (see the module docs). Call it only
        for a committed attempt, holding the ledger session that knows it."""
        epoch, attempt, files = committed.epoch, committed.attempt, committed.files
        versions = self.versions(epoch)
        try:
            versions.mkdir(parents=True, exist_ok=True)
            self._name_place()
            version = versions / attempt
            if not version.is_dir():  # a complete copy is renamed in; a partial one is not
                staging = versions / f".{attempt}.{uuid.uuid4().hex[:8]}"
                if files is None:
                    staging.mkdir()
                else:
                    shutil.copytree(files, staging, copy_function=link_or_copy)
                os.rename(staging, version)
            previous = self.published(epoch)
            self._point(epoch, attempt)
            for entry in versions.iterdir():
                if entry.name not in (attempt, previous):
                    _remove(entry)
        except OSError as err:
            reason = f"{err.strerror or err}" + (f": {err.filename}" if err.filename else "")
            raise SinkPublishError(self.pipeline, self.stage, epoch, self.root, reason) from err

    def _name_place(self) -> None:
        """Give the directory its own name (``PLACE``) unless it has one: written whole under
        a temporary name, then renamed."""
        place = self.root / VERSIONS / PLACE
        if not place.exists():
            fresh = place.with_name(f".place.{uuid.uuid4().hex[:8]}")
            fresh.write_text(uuid.uuid4().hex)
            os.replace(fresh, place)

    def _point(self, epoch: Time, attempt: str) -> None:
        """Rename a new link over ``PATH/epoch=N``: readers see the old target or the new."""
        link = self.link(epoch)
        fresh = self.versions(epoch) / f".link.{uuid.uuid4().hex[:8]}"
        os.symlink(self.target(epoch, attempt), fresh)
        try:
            os.replace(fresh, link)
        except IsADirectoryError:
            # A plain directory, published before versions existed: no rename swaps a
            # directory for a link, so it moves aside first (the epoch is briefly absent).
            os.rename(link, self.versions(epoch) / f".plain.{uuid.uuid4().hex[:8]}")
            os.replace(fresh, link)


def _remove(entry: Path) -> None:
    if entry.is_symlink() or not entry.is_dir():
        entry.unlink(missing_ok=True)
    else:
        shutil.rmtree(entry)


MARK_AFTER = 64
"""Committed sink epochs looked at beyond a sink's mark before the mark moves: a ``run()``
looks at no more than this many older epochs than its own, and writes the mark (one small
transaction) once per this many."""


def publish_committed(
    ledger: Ledger, pipeline: str, sinks: Sequence[SinkTarget], *, recheck: bool = False
) -> list[tuple[str, Time]]:
    """Publish every committed epoch of ``sinks`` that its sink does not show (a run killed
    between its commit and its publish, a failed publish, a revision), in one ledger session:
    those committed since the sink's mark, or, with ``recheck``, every one (a link or a table
    changed by hand). Returns the ``(sink, epoch)`` published.

    Once all it looked at are shown, at least ``MARK_AFTER`` of them, the mark moves past
    them: the look's cost follows what was committed lately, not the sink's history."""
    done: list[tuple[str, Time]] = []
    if not sinks:
        return done
    with ledger.session():
        for sink in sinks:
            reader = sink.reader()  # None: nothing published there yet, no mark kept
            if recheck or reader is None:
                messages = ledger.messages(pipeline, sink.stage, 0)
            else:
                messages = ledger.unmarked(pipeline, sink.stage, 0, reader)
            if not messages:
                continue
            committed = [_committed(m) for m in messages]
            for c, shown in zip(committed, sink.shown(committed), strict=True):
                if not shown:
                    sink.publish(c)
                    done.append((sink.stage, c.epoch))
            if reader is not None and len(committed) >= MARK_AFTER:
                through = max(c.batch_id for c in committed)
                ledger.mark(pipeline, sink.stage, 0, reader, through=through)
    return done


def _committed(m: MessageRecord) -> Committed:
    """A sink's committed message as what it publishes."""
    return Committed(m.time, m.attempt, m.batch_id, Path(m.path) if m.path else None)


def sink_states(ledger: Ledger, pipeline: str, sinks: Sequence[SinkTarget]) -> list[SinkState]:
    """Where each of ``sinks`` stands (``SinkState``), in one ledger session."""
    out: list[SinkState] = []
    with ledger.session():
        for sink in sinks:
            committed = [_committed(m) for m in ledger.messages(pipeline, sink.stage, 0)]
            shown = [c.epoch for c, ok in zip(committed, sink.shown(committed), strict=True) if ok]
            last = shown[-1] if shown else None  # in time order
            where, version = sink.location, sink.version()
            out.append(
                SinkState(sink.stage, sink.format, where, len(shown), len(committed), last, version)
            )
    return out


_TARGETS: dict[SinkFormat, Callable[[SinkStage, str, Path], SinkTarget]] = {
    SinkFormat.PARQUET: _parquet,
    SinkFormat.DELTA: _delta,
    SinkFormat.ICEBERG: _iceberg,
}
