"""The checks every fault campaign runs after a kill and after its recovery, in one place.

Each check adds to a ``Tally`` (checks run, rows compared, rows lost, rows counted twice) and
writes a line for each problem it finds; a campaign asserts ``tally.problems == []``.

- ``frontiers`` / ``moved_back``: the frontier of every location, and whether one moved back.
- ``check_visible``: nothing uncommitted is visible: every message the ledger names has its
  data, every sink link names the attempt the ledger committed (or one committed before it),
  and every state the state store shows belongs to an attempt the ledger committed.
- ``check_outputs``: every stage at every epoch, read through the ledger with DuckDB, equals
  plain DuckDB SQL over the raw inputs (the partial ``balances`` holds only present keys: each
  of its rows must be the oracle's); the sink's published files too; and ``rebank``'s.
- ``check_twins``: a lookup of every account in the partial ``balances`` equals the full twin
  and the oracle.
- ``check_capture``: the capture of ``movements`` is a valid stream holding, at each epoch,
  exactly the rows the ledger has committed there.
- ``check_expectations``: each expectation has one result for each current attempt of its
  stage (none lost, none counted twice), a result marked committed only for an attempt the
  ledger committed (a killed run records nothing), and the quarantine of ``valid_cards`` at
  every epoch equals the oracle's rows, its count the expectation's failing rows.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
from deltalake import DeltaTable

from pipelines.capture import log as capture_log
from pipelines.examples.bank_data import ORACLE_SQL, QUARANTINE_SQL, Oracle
from pipelines.run.iceberg_sink import PUBLISH, IcebergSink
from pipelines.run.kinds import messages_read
from pipelines.run.runtime import Runtime
from pipelines.run.sinks import sink_target
from pipelines.stages.sink_formats import SinkFormat
from progress import less_equal
from tests.faults.scenario import CAPTURED, Home
from tests.fixtures.captures import rows_at

Row = tuple[Any, ...]
Frontiers = dict[str, tuple[Any, ...]]

TWINS = {
    "balances_full": "balances",
    "export": "category_totals",
    "lake": "category_totals",
    "ice": "category_totals",
}
"""Stages checked against another stage's oracle."""


@dataclass
class Tally:
    checks: int = 0
    rows: int = 0
    lost: int = 0
    doubled: int = 0
    problems: list[str] = field(default_factory=list)

    def check(self, ok: bool, problem: str) -> None:
        self.checks += 1
        if not ok:
            self.problems.append(problem)

    def rows_equal(
        self, what: str, got: Iterable[Row], expected: Iterable[Row], *, subset: bool = False
    ) -> None:
        """Compare as multisets: a row of ``expected`` missing is lost, one too many counted
        twice (with ``subset``, only rows beyond ``expected`` are wrong)."""
        have, want = Counter(_normal(got)), Counter(_normal(expected))
        extra = have - want
        missing = Counter() if subset else want - have
        self.checks += 1
        self.rows += sum(want.values())
        self.lost += sum(missing.values())
        self.doubled += sum(extra.values())
        if extra or missing:
            self.problems.append(
                f"{what}: {sum(missing.values())} rows lost {sorted(missing)[:3]}, "
                f"{sum(extra.values())} too many {sorted(extra)[:3]}"
            )

    def add(self, other: Tally) -> None:
        self.checks += other.checks
        self.rows += other.rows
        self.lost += other.lost
        self.doubled += other.doubled
        self.problems += other.problems


def _normal(rows: Iterable[Row]) -> list[Row]:
    return [tuple(float(v) if isinstance(v, float) else v for v in row) for row in rows]


class OnceOracle(Oracle):
    """The oracle of the inputs as they are: each stage at each epoch computed once (a twin is
    checked against its stage's, and ``rebank`` against ``bank``'s ``category_totals``), and
    again only once the inputs have changed (``oracle_of``)."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self._found: dict[tuple[str, int, bool], tuple[list[str], list[Row]]] = {}

    def expected(
        self, stage: str, epoch: int, *, quarantine: bool = False
    ) -> tuple[list[str], list[Row]]:
        if (stage, epoch, quarantine) not in self._found:
            found = super().expected(stage, epoch, quarantine=quarantine)
            self._found[stage, epoch, quarantine] = found
        return self._found[stage, epoch, quarantine]


_ORACLES: dict[Path, tuple[frozenset[tuple[str, int, int]], OnceOracle]] = {}


def oracle_of(root: Path) -> OnceOracle:
    """The oracle of the inputs under ``root``: the same one while no input file was added,
    removed or changed (a correction writes one), so a campaign computes each answer once."""
    stats = ((f, f.stat()) for f in root.rglob("*") if f.is_file())
    files = frozenset((str(f), stat.st_size, stat.st_mtime_ns) for f, stat in stats)
    cached = _ORACLES.get(root)
    if cached is None or cached[0] != files:
        _ORACLES[root] = (files, OnceOracle(root))
    return _ORACLES[root][1]


# -- frontiers -----------------------------------------------------------------------------------


def frontiers(rt: Runtime) -> Frontiers:
    """The frontier of every location of the pipeline, as the ledger has it now."""
    tracker = rt.ledger.tracker(rt.pipeline.name)
    return {str(loc): tuple(tracker.frontier(loc).elements) for loc in tracker.graph.locations}


def moved_back(before: Frontiers, after: Frontiers) -> list[str]:
    """The locations whose frontier is not at or beyond where it was ``before``."""
    back = []
    for loc, old in before.items():
        new = after.get(loc, ())
        if not all(any(less_equal(o, t) for o in old) for t in new) or (new and not old):
            back.append(f"frontier of {loc} moved back: {list(old)} -> {list(new)}")
    return back


def check_frontiers(tally: Tally, before: Frontiers, after: Frontiers) -> None:
    back = moved_back(before, after)
    tally.check(not back, "; ".join(back))


# -- reading through the ledger ------------------------------------------------------------------


def committed_rows(rt: Runtime, stage: str, epoch: int, columns: Sequence[str]) -> list[Row]:
    """The rows a reader of ``stage`` at ``epoch`` sees, read with DuckDB through the ledger."""
    paths = [m.path for m in messages_read(rt.pipeline, rt.ledger, stage, epoch) if m.path]
    return parquet_rows([f"{p}/*.parquet" for p in paths], columns)


def parquet_rows(globs: Sequence[str], columns: Sequence[str]) -> list[Row]:
    if not globs:
        return []
    names = ", ".join(f'"{c}"' for c in columns)
    with _duckdb() as con:
        found = con.execute(f"SELECT {names} FROM read_parquet(?)", [list(globs)]).fetchall()
    return [tuple(r) for r in found]


_DATABASE: list[duckdb.DuckDBPyConnection] = []


def _duckdb() -> duckdb.DuckDBPyConnection:
    """A new connection to this process's one in-memory DuckDB: a campaign reads Parquet files
    hundreds of times, and a database takes about 15 ms of CPU to make (its catalog), a
    connection to it about 1 ms."""
    if not _DATABASE:
        _DATABASE.append(duckdb.connect())
    return _DATABASE[0].cursor()


# -- the checks ----------------------------------------------------------------------------------


def check_visible(tally: Tally, rt: Runtime) -> None:
    """Nothing that was not committed is visible (see the module docs)."""
    p = rt.pipeline.name
    for name, stage in rt.pipeline.stages.items():
        for m in rt.ledger.messages(p, name, 0):
            if m.path:
                tally.check(Path(m.path).is_dir(), f"{name} epoch {m.time}: {m.path} is gone")
        if stage.kind == "sink" and stage.format is not SinkFormat.PARQUET:
            check_table(tally, rt, name)
        elif stage.kind == "sink":
            sink = rt.sink_path(name)
            committed = {m.time: m.attempt for m in rt.ledger.messages(p, name, 0)}
            for link in sorted(sink.glob("epoch=*")):
                epoch = int(link.name.split("=")[1])
                shown = Path(link.readlink()).name if link.is_symlink() else None
                ever = {r.attempt for r in rt.ledger.history(p, name, epoch).messages}
                tally.check(
                    shown in ever or shown == committed.get(epoch),
                    f"sink {name} epoch {epoch} shows {shown}, not a committed attempt",
                )
    with rt.state.connect(reading=True) as con:
        shown = con.execute(
            "SELECT stage, epoch, attempt FROM attempts WHERE pipeline = ? AND committed "
            "AND NOT replaced AND NOT starts_with(attempt, 'fill-')",
            [p],
        ).fetchall()
        staged = set(
            con.execute(
                "SELECT stage, epoch, attempt FROM attempts WHERE pipeline = ? AND NOT committed",
                [p],
            ).fetchall()
        )
    for stage, epoch, attempt in shown:
        current = {m.attempt for m in rt.ledger.message(p, stage, 0, epoch)}
        # A run killed between its ledger commit and its state's leaves the ledger's attempt
        # staged: every read settles it first (``Lookups._settle``), so readers see the ledger's.
        settles = any((stage, epoch, a) in staged for a in current)
        tally.check(
            attempt in current or settles,
            f"state of {stage} epoch {epoch} is attempt {attempt}, the ledger's is {current}",
        )


def table_commits(rt: Runtime, name: str) -> list[tuple[int, str]]:
    """Each publish to a table sink: its epoch and attempt, oldest first (a Delta commit's info;
    an Iceberg transaction's snapshots, counted once by their publish token)."""
    spec = rt.pipeline.stage(name)
    if spec.format is SinkFormat.DELTA:
        root = rt.sink_path(name)
        if not (root / "_delta_log").is_dir():
            return []
        return [
            (int(h["epochgate.epoch"]), h["epochgate.attempt"])
            for h in reversed(DeltaTable(str(root)).history())
            if "epochgate.epoch" in h
        ]
    table = _iceberg(rt, name).loaded()
    if table is None:
        return []
    seen: dict[str, tuple[int, int, str]] = {}
    for snapshot in table.snapshots():
        props = snapshot.summary.additional_properties if snapshot.summary else {}
        token = props.get(PUBLISH)
        if token is not None and token not in seen:
            epoch, attempt = int(props["epochgate.epoch"]), props["epochgate.attempt"]
            seen[token] = (snapshot.sequence_number, epoch, attempt)
    return [(epoch, attempt) for _, epoch, attempt in sorted(seen.values())]


def last_publish(commits: list[tuple[int, str]], epoch: int) -> str | None:
    """Of a table's ``commits`` (``table_commits``), the attempt of its last publish of
    ``epoch`` (None: never published)."""
    found = [attempt for e, attempt in commits if e == epoch]
    return found[-1] if found else None


def table_rows(rt: Runtime, name: str, columns: Sequence[str]) -> dict[int, list[Row]]:
    """A table sink's current rows, by epoch: the whole table read once (a campaign checks
    every epoch of it after every kill)."""
    if rt.pipeline.stage(name).format is SinkFormat.DELTA:
        root = rt.sink_path(name)
        if not (root / "_delta_log").is_dir():
            return {}
        read = DeltaTable(str(root)).to_pyarrow_table()
    else:
        table = _iceberg(rt, name).loaded()
        if table is None:
            return {}
        read = table.scan().to_arrow()
    by_epoch: dict[int, list[Row]] = {}
    for r in read.select(list(dict.fromkeys(["epoch", *columns]))).to_pylist():
        by_epoch.setdefault(int(r["epoch"]), []).append(tuple(r[c] for c in columns))
    return by_epoch


def _iceberg(rt: Runtime, name: str) -> IcebergSink:
    target = sink_target(rt.pipeline.stage(name), rt.pipeline.name, rt.home)  # type: ignore[arg-type]
    assert isinstance(target, IcebergSink)
    return target


def check_table(tally: Tally, rt: Runtime, name: str) -> None:
    """A Delta sink's table: every commit publishes an attempt the ledger committed for its
    epoch, and no attempt twice."""
    p = rt.pipeline.name
    commits = table_commits(rt, name)
    for epoch, attempt in commits:
        ever = {r.attempt for r in rt.ledger.history(p, name, epoch).messages}
        tally.check(
            attempt in ever, f"sink {name} epoch {epoch} published {attempt}, never committed"
        )
    twice = [c for c, n in Counter(commits).items() if n > 1]
    tally.check(not twice, f"sink {name} published twice: {twice}")


def check_outputs(tally: Tally, rt: Runtime, oracle: Oracle, epochs: int) -> None:
    """Every stage of ``bank`` at every epoch it has done against the oracle, the sink's files
    too; epochs ``0..epochs-1`` must be done."""
    p = rt.pipeline.name
    tally.check(rt.ledger.verify(p).ok, f"ledger verify of {p} failed")
    for stage in rt.pipeline.stages:
        spec = rt.pipeline.stage(stage)
        of = TWINS.get(stage, stage)
        if spec.is_source or of not in ORACLE_SQL:
            continue
        done = rt.ledger.done_epochs(p, stage)
        tally.check(
            set(range(epochs)) <= set(done), f"{stage} has done {done}, not 0..{epochs - 1}"
        )
        table: tuple[list[tuple[int, str]], dict[int, list[Row]]] | None = None
        for epoch in done:
            assert isinstance(epoch, int)
            columns, expected = oracle.expected(of, epoch)
            if spec.kind == "sink" and spec.format is not SinkFormat.PARQUET:
                if table is None:  # read once for all its epochs
                    table = table_commits(rt, stage), table_rows(rt, stage, columns)
                current = [m.attempt for m in rt.ledger.message(p, stage, 0, epoch)]
                last = last_publish(table[0], epoch)
                tally.check(
                    [last] == current, f"sink {stage} epoch {epoch} shows {last}, not {current}"
                )
                got = table[1].get(epoch, [])
            elif spec.kind == "sink":
                link = rt.sink_path(stage) / f"epoch={epoch}"
                current = [m.attempt for m in rt.ledger.message(p, stage, 0, epoch)]
                shown = Path(link.readlink()).name if link.is_symlink() else None
                tally.check(
                    [shown] == current, f"sink {stage} epoch {epoch} shows {shown}, not {current}"
                )
                got = parquet_rows([f"{link}/*.parquet"], columns) if link.exists() else []
            else:
                got = committed_rows(rt, stage, epoch, columns)
            partial = spec.partial is not None
            tally.rows_equal(f"{stage} epoch {epoch}", got, expected, subset=partial)


def check_recorded(tally: Tally, rt: Runtime) -> None:
    """A result recorded as committed names an attempt the ledger committed (see the module
    docs): what a killed run checked is nowhere."""
    p = rt.pipeline.name
    for r in rt.expectations():
        if r.committed:
            ever = {m.attempt for m in rt.ledger.history(p, r.stage, r.epoch).messages}
            tally.check(
                r.attempt in ever,
                f"{r.stage}.{r.expectation} epoch {r.epoch}: a result of attempt {r.attempt}, "
                "which the ledger never committed",
            )


def check_expectations(tally: Tally, rt: Runtime, oracle: Oracle) -> None:
    """Each current attempt's results once, and the quarantine against the oracle."""
    p = rt.pipeline.name
    check_recorded(tally, rt)
    results = rt.expectations()
    for e in rt.pipeline.expectations():
        for epoch in rt.ledger.done_epochs(p, e.stage):
            assert isinstance(epoch, int)
            for m in rt.ledger.message(p, e.stage, 0, epoch):
                found = [
                    r
                    for r in results
                    if (r.stage, r.expectation, r.attempt) == (e.stage, e.name, m.attempt)
                    and r.committed
                ]
                tally.check(
                    len(found) == 1,
                    f"{e.stage}.{e.name} epoch {epoch}: {len(found)} results of its current "
                    f"attempt {m.attempt}, not 1",
                )
                if e.stage in QUARANTINE_SQL and len(found) == 1:
                    columns, expected = oracle.expected(e.stage, epoch, quarantine=True)
                    kept = rt.ledger.quarantine(p, e.stage, [m.attempt])
                    rows = parquet_rows([f"{q.path}/*.parquet" for q in kept], columns)
                    tally.rows_equal(f"{e.stage} epoch {epoch} quarantine", rows, expected)
                    tally.check(
                        found[0].rows_failing == len(expected),
                        f"{e.stage}.{e.name} epoch {epoch}: {found[0].rows_failing} failing "
                        f"rows recorded, the oracle's quarantine has {len(expected)}",
                    )


def check_replayed(tally: Tally, rebank: Runtime, oracle: Oracle, epochs: int) -> None:
    """``rebank``'s ``category_totals`` against the oracle at every epoch it has done."""
    p = rebank.pipeline.name
    tally.check(rebank.ledger.verify(p).ok, f"ledger verify of {p} failed")
    done = rebank.ledger.done_epochs(p, "category_totals")
    tally.check(set(range(epochs)) <= set(done), f"rebank has done {done}, not 0..{epochs - 1}")
    for epoch in done:
        assert isinstance(epoch, int)
        columns, expected = oracle.expected("category_totals", epoch)
        got = committed_rows(rebank, "category_totals", epoch, columns)
        tally.rows_equal(f"rebank category_totals epoch {epoch}", got, expected)


def check_twins(tally: Tally, rt: Runtime, oracle: Oracle, epoch: int) -> None:
    """Every account in the partial ``balances`` as of ``epoch`` equals the full twin and the
    oracle (the holes among them are filled by an upquery)."""
    accounts = [
        int(r[0])
        for r in oracle.con.execute("SELECT DISTINCT account_id FROM movements").fetchall()
    ]
    part = rt.lookup("balances", accounts, as_of=epoch).rows
    full = rt.lookup("balances_full", accounts, as_of=epoch).rows
    rows = [tuple(r[c] for c in ("account_id", "balance_cents", "movements")) for r in part]
    twin = [tuple(r[c] for c in ("account_id", "balance_cents", "movements")) for r in full]
    tally.rows_equal(f"balances (partial) as of epoch {epoch}", rows, twin)
    tally.rows_equal(
        f"balances_full as of epoch {epoch}", twin, oracle.balances_as_of(accounts, epoch)
    )


def check_capture(tally: Tally, rt: Runtime, home: Home) -> None:
    """The capture of ``movements`` is a valid stream equal to the ledger's committed history."""
    try:
        log = capture_log.read(home.capture, check_data=True)
    except Exception as err:  # a refused stream is the finding
        tally.check(False, f"capture {home.capture} refused: {err}")
        return
    tally.check(bool(log.events), f"capture {home.capture} holds no event")
    columns = ["movement_id", "account_id", "amount_cents", "category"]
    names = ", ".join(columns)
    for m_time in sorted({m.time for m in rt.ledger.messages(rt.pipeline.name, CAPTURED, 0)}):
        assert isinstance(m_time, int)
        got = rows_at(home.capture, m_time, f"SELECT {names} FROM t")
        expected = committed_rows(rt, CAPTURED, m_time, columns)
        tally.rows_equal(f"capture of {CAPTURED} at epoch {m_time}", got, expected)


def snapshot(*runtimes: Runtime | None) -> dict[str, Frontiers]:
    """The frontiers of each pipeline given, by pipeline name."""
    return {rt.pipeline.name: frontiers(rt) for rt in runtimes if rt is not None}


def check_moves(tally: Tally, before: dict[str, Frontiers], *runtimes: Runtime | None) -> None:
    """No frontier of the pipelines given moved back since ``before``."""
    for rt in runtimes:
        if rt is not None and rt.pipeline.name in before:
            check_frontiers(tally, before[rt.pipeline.name], frontiers(rt))


def check_after_kill(rt: Runtime, rebank: Runtime | None, before: dict[str, Frontiers]) -> Tally:
    """What must hold the moment a run is killed, before any recovery."""
    tally = Tally()
    check_moves(tally, before, rt, rebank)
    for one in (rt, rebank):
        if one is not None:
            tally.check(one.ledger.verify(one.pipeline.name).ok, "ledger verify failed")
            check_visible(tally, one)
    check_recorded(tally, rt)
    return tally


def check_all(
    rt: Runtime,
    rebank: Runtime | None,
    home: Home,
    epochs: int,
    before: dict[str, Frontiers],
) -> Tally:
    """Every check of a finished campaign step (see the module docs)."""
    tally = Tally()
    oracle = oracle_of(home.inputs)
    check_moves(tally, before, rt, rebank)
    check_visible(tally, rt)
    check_outputs(tally, rt, oracle, epochs)
    check_expectations(tally, rt, oracle)
    check_twins(tally, rt, oracle, epochs - 1)
    if home.capture.exists():
        check_capture(tally, rt, home)
    if rebank is not None:
        check_visible(tally, rebank)
        check_replayed(tally, rebank, oracle, epochs)
    return tally
