"""What one stage run works with (its epoch, attempt, input frames, where it writes) and what
it produces (the files of its output message, and what must happen when it commits or not).

A stage kind's ``compute`` gets a ``StageWork`` and returns a ``Produced``; the executor owns
everything around it: admission, the run record, the commit.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from pipelines.run import expectations
from pipelines.run.iteration import RoundCallback
from pipelines.run.storage import DataStore, link_or_copy, runtime_home
from pipelines.spark.empty import empty_frame
from pipelines.spark.footers import one_file_schema, parts, spark_schema
from pipelines.spark.session import LazySpark
from pipelines.stages.expectations import Expectation
from pipelines.stages.kinds import Columns
from progress import Time
from progress.ledger import CheckEntry, Ledger, MessageRef
from state_store import KeyedState

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

Resolved = tuple[list[MessageRef], list[str]]
"""An input's current messages at an epoch: their references and their data paths."""

Build = Callable[["Sequence[DataFrame]", Sequence[Columns], Time], "DataFrame"]
"""How an input that is not materialized is recomputed from the frames of the stages whose
files hold its data (with their columns, where known), at an epoch
(``pipelines.run.ephemeral``)."""


def read_files(paths: Sequence[str]) -> list[str]:
    """What a run gives Spark to read its input messages by: their Parquet files, named one by
    one (given the directories, Spark lists each on every read: a 100,000-row join and its
    write took about 7% longer); a directory with no file left in it as it is, for Spark's own
    error."""
    return [str(f) for path in paths for f in (parts(path) or [Path(path)])]


@dataclass(frozen=True)
class Written:
    """One data directory of an output message: its path, rows and bytes."""

    path: str | None
    """None for a message with no data (a transform that is not materialized)."""
    rows: int
    bytes: int


@dataclass(frozen=True)
class Produced:
    """What a stage's ``compute`` made of one epoch, and what its commit must take along.

    Each of ``files`` becomes one output message (several only when a union catalogs its
    inputs' files as they are: ``shared``). ``written`` is the attempt directory this run wrote,
    removed when another run committed the epoch first.
    """

    files: tuple[Written, ...]
    written: Path | None
    shared: bool = False
    rounds: int = 0
    """For an iterative stage: the rounds this run computed."""
    announces: bool = True
    """False when the run announces no output message: it consumes its input and ends there (a
    loop's feedback with nothing to carry round, so the loop stops)."""
    in_commit: Callable[[Ledger], None] | None = None
    """Called inside the transaction of the run's commit (an iterative stage leaves its scope)."""
    committed: Callable[[int], None] | None = None
    """Called after the commit, with its batch (a stateful stage's staged rows become its
    state; a sink publishes)."""
    abandoned: Callable[[], None] | None = None
    """Called when the commit was a repeat: another run committed the epoch first."""
    quarantine: Path | None = None
    """Where the rows its ``drop`` expectations removed were written, if any were
    (``pipelines.run.expectations``)."""
    checked: list[CheckEntry] | None = None
    """Its expectations' counts when its write made them; None: count its files."""


@dataclass
class StageWork:
    """One run of one stage at one epoch, as its kind's ``compute`` sees it."""

    pipeline: str
    stage: str
    epoch: Time
    output_time: Time
    attempt: str
    revision: bool
    lazy_spark: LazySpark
    """The run's Spark session, started by the first use (in the work, not in a ledger session)."""
    store: DataStore
    ledger: Ledger
    state: KeyedState
    inputs: list[Resolved]
    """Per stage whose files are read (per input port, unless one is not materialized): the
    current messages read, and their data paths."""
    read_schemas: list[StructType | None]
    """Per entry of ``inputs``: the schema to read its files with (a source's), or none."""
    empty: list[StructType | None]
    """Per entry of ``inputs`` without data at this epoch: the schema of its empty frame."""
    derive: list[tuple[int, Build | None]] = field(default_factory=list)
    """Per input port, when one is not materialized: how many entries of ``inputs`` (in order)
    it is recomputed from, and how (``None``: the one entry as it is). Empty: one entry per
    port, as it is (``pipelines.run.ephemeral``)."""
    on_round: RoundCallback | None = None
    sort_key: tuple[str, ...] | None = None
    """The columns its output message is sorted by (``pipelines.run.layout.sort_key``), if any."""
    below: tuple[str, ...] = ()
    """The stages below this one that read its output, directly or not (for a partial stage:
    the partial stages keyed like it, which an eviction follows)."""
    carried: tuple[MessageRef, ...] = ()
    """The messages of its own it reads besides its inputs (``Stage.carried``)."""
    expectations: tuple[Expectation, ...] = ()
    """The stage's expectations: its ``drop`` ones split what ``write`` writes."""
    scratch: list[Path] = field(default_factory=list)
    """Directories to remove when the run's work is over, committed or not."""

    @property
    def spark(self) -> SparkSession:
        return self.lazy_spark.session()

    @cached_property
    def _read_with(self) -> list[tuple[list[str], StructType | None]]:
        """Per entry of ``inputs``: the files to read and the schema to read them with, if
        known: a source's (its files were checked against it on send), the one Spark wrote in
        their footers (``pipelines.spark.footers``), or for no files the empty frame's."""
        out: list[tuple[list[str], StructType | None]] = []
        for (_, paths), declared, schema in zip(
            self.inputs, self.read_schemas, self.empty, strict=True
        ):
            files = read_files(paths)  # listed once: the schema is read from the first
            if not paths:
                assert schema is not None
                out.append((files, schema))
            else:
                out.append((files, declared or (spark_schema(files) if files else None)))
        return out

    @cached_property
    def frames(self) -> list[DataFrame]:
        """One DataFrame per input port, built once, each read with its columns known where
        they are (``_read_with``), so no Spark job infers them."""
        out: list[DataFrame] = []
        for files, known in self._read_with:
            if not files and known is not None:
                out.append(empty_frame(self.spark, known))
            elif known is not None:
                out.append(self.spark.read.schema(known).parquet(*files))
            else:
                out.append(self.spark.read.parquet(*files))
        if not self.derives:
            return out
        columns = self._entry_columns
        return [
            out[at] if build is None else build(out[at:end], columns[at:end], self.epoch)
            for at, end, build in self._ports
        ]

    @property
    def _entry_columns(self) -> list[Columns]:
        """Per entry of ``inputs``: the columns it is read with, where known."""
        return [
            None if known is None else tuple(known.fieldNames()) for _, known in self._read_with
        ]

    @property
    def columns(self) -> list[Columns]:
        """Per input port, the columns of its frame in ``frames`` when they are known without
        asking the engine (a port recomputed in this run: None)."""
        entries = self._entry_columns
        if not self.derives:
            return entries
        return [entries[at] if build is None else None for at, _, build in self._ports]

    @property
    def _ports(self) -> list[tuple[int, int, Build | None]]:
        """Per input port, when one is not materialized: the slice of ``inputs`` it is made of
        (start, end) and how (``derive``)."""
        out: list[tuple[int, int, Build | None]] = []
        at = 0
        for count, build in self.derive:
            out.append((at, at + count, build))
            at += count
        return out

    @property
    def derives(self) -> bool:
        """Whether an input is recomputed in this run (not as its files hold it)."""
        return any(build is not None for _, build in self.derive)

    @property
    def home(self) -> Path:
        """The runtime's home (see ``pipelines.run.storage.runtime_home``)."""
        return runtime_home(self.ledger.path)

    @property
    def reads(self) -> tuple[MessageRef, ...]:
        """Every message this run reads (its lineage), each once: its inputs', and its own it
        carries."""
        refs = (*(ref for refs, _ in self.inputs for ref in refs), *self.carried)
        return tuple(dict.fromkeys(refs))

    @property
    def input_paths(self) -> list[str]:
        return [path for _, paths in self.inputs for path in paths]

    def attempt_dir(self) -> Path:
        """The fresh directory of this run's output message."""
        return self.store.attempt_dir(self.pipeline, self.stage, 0, self.output_time, self.attempt)

    def scratch_dir(self) -> Path:
        """A private directory for the run's intermediate files, removed after its work."""
        path = self.store.attempt_dir(
            self.pipeline, self.stage, 0, self.epoch, f"{self.attempt}.scratch"
        )
        path.mkdir(parents=True, exist_ok=True)
        self.scratch.append(path)
        return path

    def write(self, df: object) -> Produced:
        """Write ``df`` (what the stage's function returned) as the run's output message."""
        from pyspark.sql import DataFrame as AnyFrame  # classic and Spark Connect frames

        if not isinstance(df, AnyFrame):
            raise TypeError(f"the stage function returned {type(df).__name__}, not a DataFrame")
        path = self.attempt_dir()
        try:
            written = expectations.write(df, self.expectations, self.sort_key, path)
            rows, size = self.store.stats(path)
        except BaseException:
            shutil.rmtree(path, ignore_errors=True)
            raise
        files = (Written(str(path), rows, size),)
        return Produced(files, path, quarantine=written.quarantine, checked=written.checked)

    @property
    def drops(self) -> bool:
        """Whether an expectation drops rows from its output (its files must be written)."""
        return bool(expectations.drops(self.expectations))

    @cached_property
    def linkable(self) -> list[Path] | None:
        """The Parquet files of the one input, when its output may be those very files: read
        as they are (no function applied, no declared schema to read them with, no sorting),
        all written by Spark with one schema, or all by an engine that writes no Spark schema
        (Sail) with one file schema. Else None. Read once per run (its footers)."""
        if self.derives or len(self.inputs) != 1 or self.sort_key or self.read_schemas[0]:
            return None
        if self.drops:
            return None
        paths = self.inputs[0][1]
        if not paths:
            return None
        schemas = {spark_schema([path]) for path in paths}
        if schemas == {None} and not one_file_schema(paths):
            return None
        if len(schemas) != 1:
            return None
        return [part for path in paths for part in parts(path)]

    def link(self, files: list[Path]) -> Produced:
        """The run's output message made of ``files`` (committed, so immutable): hard links
        in a fresh attempt directory (copies on another file system), no Spark job."""
        path = self.attempt_dir()
        try:
            path.mkdir(parents=True)
            for i, part in enumerate(files):
                link_or_copy(str(part), str(path / f"part-{i:05d}-{part.name}"))
            rows, size = self.store.stats(path)
        except BaseException:
            shutil.rmtree(path, ignore_errors=True)
            raise
        return Produced((Written(str(path), rows, size),), path)

    def clean(self) -> None:
        for path in self.scratch:
            shutil.rmtree(path, ignore_errors=True)
        self.scratch.clear()
