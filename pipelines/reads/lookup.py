"""Reads of keyed state by key: ``lookup``, ``evict`` and ``state_info`` of a runtime.

A read of a full stage answers from its state. A read of a partial stage answers its present
keys from state (hits) and fills its holes with one upquery for all of them
(``pipelines.reads.upquery``), holding the family's right to change state, then answers them too.
After a fill, each stage it filled (the one read and the partial stages above it) that has a key
budget evicts its least recently read keys beyond it (and they leave the partial stages below it
too).

A key is a scalar for a one-column key, else a tuple in key-column order; it is checked against
the key columns' types before anything is read.
"""

from __future__ import annotations

import datetime
import decimal
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from pipelines.errors import StageNotReadyError, StateReadError
from pipelines.reads.key_scan import ScanPlan
from pipelines.reads.upquery import Host, Upquery
from pipelines.run.carry import committed_in
from pipelines.run.epochs import epoch_problem
from pipelines.spark.footers import spark_schema
from pipelines.stages.families import chain, followers
from pipelines.stages.kinds import KeyedStage, Stage
from progress.sentences import ready_not_run
from state_store import Key, PartialKeys, StateCounts

if TYPE_CHECKING:
    from pyspark.sql.types import DataType

WAIT_POLL = 0.25
"""Seconds between looks at the ledger while a lookup waits for an epoch."""


@dataclass(frozen=True)
class Lookup:
    """The answer to a read of keyed state: one row per key that has a state row (in the order
    asked; a key whose state is empty has none), the keys answered from state (``hits``) and
    by an upquery (``upqueried``), and the epoch answered (``as_of``)."""

    stage: str
    rows: list[dict[str, Any]]
    hits: list[Any]
    upqueried: list[Any]
    as_of: int
    seconds: float
    scans: tuple[ScanPlan, ...] = ()
    """What the upquery read, if one ran: per stage that scanned its input messages, the files
    and row groups that could hold the keys, out of how many (``pipelines.reads.key_scan``)."""


@dataclass(frozen=True, kw_only=True)
class StateInfo(StateCounts):
    """A keyed stage's state: whether it is partial, its key budget, and its counts (present
    keys, every key of a full one; state rows; bytes, estimated from a sample of its tables;
    and what reads found)."""

    stage: str
    partial: bool
    max_keys: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"stage": self.stage, "partial": self.partial, **asdict(self)}


def _accepts(data_type: DataType, value: object) -> bool:
    """Whether ``value`` can stand for a key column of ``data_type``."""
    from pyspark.sql import types as T

    if isinstance(data_type, T.BooleanType):
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if isinstance(data_type, T.IntegralType):  # and in the column's range: no row holds more
        bits = {T.ByteType: 8, T.ShortType: 16, T.IntegerType: 32}.get(type(data_type), 64)
        return isinstance(value, int) and -(2 ** (bits - 1)) <= value < 2 ** (bits - 1)
    if isinstance(data_type, T.FractionalType):
        return isinstance(value, int | float | decimal.Decimal)
    if isinstance(data_type, T.StringType):
        return isinstance(value, str)
    if isinstance(data_type, T.TimestampType | T.TimestampNTZType):
        return isinstance(value, datetime.datetime)
    if isinstance(data_type, T.DateType):
        return isinstance(value, datetime.date) and not isinstance(value, datetime.datetime)
    return True


def declared_key_types(stages: Mapping[str, Stage], spec: KeyedStage) -> dict[str, DataType]:
    """The types of ``spec``'s key columns that a schema declares: the stage's own, else, up
    its first inputs, the nearest stage whose declared schema has the column (the stages
    between carry the key). A column no declaration types is left out."""
    found: dict[str, DataType] = {}
    stage: Stage = spec
    while len(found) < len(spec.key):
        schema = stage.schema
        if schema is not None:
            names = schema.fieldNames()
            found.update({c: schema[c].dataType for c in spec.key if c in names and c not in found})
        if not stage.inputs:
            break
        stage = stages[stage.inputs[0]]
    return found


class KeyedReads:
    """``lookup``, ``evict`` and ``state_info`` for one runtime (see the module docs)."""

    def __init__(self, runtime: Host) -> None:
        self.rt = runtime
        self.partial = PartialKeys(runtime.state)
        self.upquery = Upquery(runtime)

    @property
    def _p(self) -> str:
        return self.rt.pipeline.name

    def keyed(self, stage: str) -> KeyedStage:
        spec = self.rt.pipeline.stage(stage)
        if not isinstance(spec, KeyedStage):
            raise StateReadError(
                stage, f"a {spec.kind} stage keeps no keyed state (only stateful and aggregate)"
            )
        return spec

    def keys(self, spec: KeyedStage, keys: object) -> list[Key]:
        """``keys`` as tuples in key-column order, each checked against the key's types."""
        if isinstance(keys, str | bytes) or not isinstance(keys, Sequence):
            raise StateReadError(spec.name, f"keys must be a list of keys: {keys!r}")
        types = declared_key_types(self.rt.pipeline.stages, spec)  # a hit starts no Spark
        if len(types) < len(spec.key):  # no declaration types a column: its output does
            types = self._written_key_types(spec) | types
        out: list[Key] = []
        for given in keys:
            key = (given,) if len(spec.key) == 1 else given
            if not isinstance(key, tuple) or len(key) != len(spec.key):
                raise StateReadError(
                    spec.name,
                    f"a key of {spec.name!r} is a tuple of {len(spec.key)} values "
                    f"({', '.join(spec.key)}): {given!r}",
                    key=given,
                )
            for column, value in zip(spec.key, key, strict=True):
                if value is None:
                    raise StateReadError(spec.name, f"key column {column!r} is null", key=given)
                data_type = types.get(column)
                if data_type is not None and not _accepts(data_type, value):
                    raise StateReadError(
                        spec.name,
                        f"key column {column!r} is {data_type.simpleString()}: {value!r} is not",
                        key=given,
                    )
            if key not in out:
                out.append(key)
        return out

    def _written_key_types(self, spec: KeyedStage) -> dict[str, DataType]:
        """The key columns' types in the stage's latest output with data, from its Parquet
        footer (no Spark); none before its first run."""
        latest = self.rt.ledger.latest_message(self._p, spec.name, 0)
        schema = spark_schema([latest.path]) if latest is not None and latest.path else None
        if schema is None:
            return {}
        names = schema.fieldNames()
        return {c: schema[c].dataType for c in spec.key if c in names}

    @staticmethod
    def shown(spec: KeyedStage, key: Key) -> Any:
        """A key as users give it: a scalar for a one-column key."""
        return key[0] if len(spec.key) == 1 else key

    def _settle(self, spec: KeyedStage) -> None:
        """Make the state show every epoch the ledger has committed: a run killed between its
        ledger commit and its state's left its rows staged, and the stage's next run would
        settle them only then."""
        committed = committed_in(self.rt.ledger, self._p, spec.name)
        self.rt.state.settle_committed(self._p, spec.name, spec.key, committed)

    def last_epoch(self, spec: KeyedStage) -> int | None:
        return self.upquery.last_epoch(spec.name)

    def lookup(self, stage: str, keys: object, as_of: int | None, wait: float | bool) -> Lookup:
        started = time.perf_counter()
        spec = self.keyed(stage)
        asked = self.keys(spec, keys)
        if wait is True or (wait is not False and not isinstance(wait, int | float)):
            raise StateReadError(stage, f"wait must be False or a number of seconds: {wait!r}")
        if as_of is not None and (why := epoch_problem(as_of)) is not None:
            raise StateReadError(stage, f"as_of must be an epoch ({why}): {as_of!r}")
        partial = spec.partial is not None
        mark = spec.partial is not None and spec.partial.max_keys is not None  # least recent
        self._settle(spec)
        read = self.partial.read(self._p, stage, spec.key, asked, as_of, partial=partial, mark=mark)
        last = read.last_epoch
        if last is not None and (as_of is None or as_of <= last):
            target = last if as_of is None else as_of  # the state has it: no ledger needed
        else:  # ask the ledger (a partial stage added to a pipeline with history has no run)
            target = self._processed(spec, as_of, float(wait or 0))
            # A run commits its state after its ledger batch: the epoch found may have come
            # since the settle above, its rows staged still.
            self._settle(spec)
            read = self.partial.read(
                self._p, stage, spec.key, asked, target, partial=partial, mark=mark
            )
        rows = {self._row_key(spec, r): r for r in read.rows}
        # A full stage has every key: it is never filled (a fill would add its rows again).
        holes = [k for k in asked if k not in read.present] if partial else []
        scans: tuple[ScanPlan, ...] = ()
        if holes:
            with self.rt.exclusive(stage):
                again = self.partial.read(
                    self._p, stage, spec.key, holes, target, partial=True, count=False
                )
                missing = [k for k in holes if k not in again.present]
                if missing:
                    self.upquery.fill(stage, missing)
                    scans = tuple(self.upquery.scans)
                    self.partial.count_misses(self._p, stage, len(missing))
                filled = self.partial.read(
                    self._p, stage, spec.key, holes, target, partial=True, count=False
                )
                rows.update({self._row_key(spec, r): r for r in filled.rows})
                self._keep_budgets(stage)
        return Lookup(
            stage=stage,
            rows=[rows[k] for k in asked if k in rows],
            hits=[self.shown(spec, k) for k in asked if k not in holes],
            upqueried=[self.shown(spec, k) for k in holes],
            as_of=target,
            seconds=time.perf_counter() - started,
            scans=scans,
        )

    def _keep_budgets(self, stage: str) -> None:
        """After a fill of ``stage``: every stage the fill filled (``stage`` and the partial
        stages above it) with a key budget evicts its least recently read keys beyond it,
        there and below."""
        stages = self.rt.pipeline.stages
        for name in chain(stages, stage):
            partial = stages[name].partial
            if partial is not None and partial.max_keys is not None:
                below = (name, *followers(stages, name))
                self.partial.evict(self._p, below, stages[name].key, max_keys=partial.max_keys)

    @staticmethod
    def _row_key(spec: KeyedStage, row: dict[str, Any]) -> Key:
        return tuple(row[k] for k in spec.key)

    def _processed(self, spec: KeyedStage, as_of: int | None, wait: float) -> int:
        """The epoch to answer: ``as_of``, or the last the stage processed; waiting up to
        ``wait`` seconds for it to be processed, else ``StageNotReadyError`` naming what holds
        it. A partial stage behind the partial stages above it first runs the epochs it is
        behind, as a fill of it would."""
        deadline = time.monotonic() + wait
        below = len(chain(self.rt.pipeline.stages, spec.name)) > 1
        while True:
            last = self.last_epoch(spec)
            if last is not None and (as_of is None or as_of <= last):
                return last if as_of is None else as_of
            if below:
                with self.rt.exclusive(spec.name):
                    self.upquery.catch_up(spec.name)
                last = self.last_epoch(spec)
                if last is not None and (as_of is None or as_of <= last):
                    return last if as_of is None else as_of
            if time.monotonic() >= deadline:
                epoch = as_of if as_of is not None else 0
                holds = self.rt.blockers(spec.name, epoch) or [ready_not_run(spec.name, epoch)]
                raise StageNotReadyError(spec.name, epoch, holds)
            time.sleep(min(WAIT_POLL, max(deadline - time.monotonic(), 0.0)))

    def evict(self, stage: str, keys: object) -> list[Any]:
        spec = self.keyed(stage)
        if spec.partial is None:
            raise StateReadError(stage, "a full stage keeps every key: there is nothing to evict")
        asked = self.keys(spec, keys)
        below = (stage, *followers(self.rt.pipeline.stages, stage))
        with self.rt.exclusive(stage):
            removed = set(self.partial.evict(self._p, below, spec.key, asked))
        return [self.shown(spec, k) for k in asked if k in removed]  # in the order asked

    def state_info(self, stage: str) -> StateInfo:
        spec = self.keyed(stage)
        partial = spec.partial is not None
        counts = self.partial.counts(self._p, stage, partial=partial)
        return StateInfo(
            stage=stage,
            partial=partial,
            max_keys=spec.partial.max_keys if spec.partial is not None else None,
            **asdict(counts),
        )
