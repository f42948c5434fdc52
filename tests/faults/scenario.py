"""The pipelines and home the fault campaigns run: ``bank`` with a full twin of its partial
``balances`` and a sink, a capture of its ``movements`` and a pipeline that replays it.

``bank`` here is the example without its iterative stage (to keep kills cheap) plus
``balances_full`` (the same fold, full: the twin the partial state is checked against) and the
sink ``export`` (``category_totals`` published under ``exports/category_totals``). ``rebank``
replays the capture of ``movements`` into its own ``category_totals``. Inputs are seeded; the
input side (sends, advances, corrections) always runs in the test's process, never killed: a
kill is of the runs, as an ingestion process is not the pipeline's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipelines.examples import bank
from pipelines.examples.bank_data import DemoData, Oracle, generate
from pipelines.run.runtime import Runtime
from pipelines.stages.pipeline import Pipeline
from progress.ledger import Ledger

SINK_PATH = "exports/category_totals"
LAKE_PATH = "lake/category_totals"
"""The Delta sink's table: the same epochs as ``export``, one table commit each."""
ICEBERG_TABLE = "bank.category_totals"
ICEBERG_CATALOG = {"type": "sql", "uri": "sqlite:///ice/catalog.db", "warehouse": "ice/wh"}
"""The Iceberg sink's table and catalog (under the home)."""
CAPTURED = "movements"
HELD = ("card_payments", bank.WORKERS["card_payments"] - 1)
"""The card worker that holds the late epoch open (its second file comes later)."""


def pipeline() -> Pipeline:
    """``bank`` without rings, with the full twin ``balances_full``, the sink ``export``, the
    Delta sink ``lake`` and the Iceberg sink ``ice``."""
    p = bank.pipeline(rings=False)
    p.stateful(
        "balances_full",
        "movements",
        key=["account_id"],
        schema=bank.BALANCES,
        update=bank.update_balances,
    )
    p.sink("export", "category_totals", path=SINK_PATH)
    p.sink("lake", "category_totals", path=LAKE_PATH, format="delta")
    ice = {"table": ICEBERG_TABLE, "catalog": ICEBERG_CATALOG}
    p.sink("ice", "category_totals", format="iceberg", **ice)  # type: ignore[arg-type]
    return p


def replayed(capture: Path) -> Pipeline:
    """``rebank``: the captured ``movements`` replayed into ``category_totals``."""
    p = Pipeline("rebank")
    moves = p.replay(CAPTURED, capture)
    p.transform("category_totals", moves, fn=bank.category_totals)
    return p


@dataclass(frozen=True)
class Home:
    """One campaign's directory: inputs, ledger, data, state and the capture."""

    root: Path

    @property
    def inputs(self) -> Path:
        return self.root / "inputs"

    @property
    def ledger_path(self) -> Path:
        return self.root / "ledger.duckdb"

    @property
    def capture(self) -> Path:
        return self.root / "capture"

    @property
    def data(self) -> DemoData:
        epochs = len(list((self.inputs / "wire_transfers").glob("epoch=*")))
        return DemoData(self.inputs, epochs, min(2, epochs - 1))

    def oracle(self) -> Oracle:
        return Oracle(self.inputs)

    def runtime(self, spark: Any) -> Runtime:
        return Runtime(pipeline(), Ledger(self.ledger_path), spark, self.root / "data")

    def rebank(self, spark: Any) -> Runtime:
        return Runtime(replayed(self.capture), Ledger(self.ledger_path), spark, self.root / "data")


def new_home(root: Path, *, epochs: int = 3, rows: int = 60, accounts: int = 10) -> Home:
    """Seeded inputs under ``root/inputs`` (nothing sent yet)."""
    generate(root / "inputs", epochs=epochs, rows=rows, accounts=accounts, seed=15)
    return Home(root)


def send_epoch(rt: Runtime, data: DemoData, epoch: int) -> None:
    """Every worker not past ``epoch`` sends its files for it and advances past it, except the
    held worker at and after the late epoch: it sends its first file there, then waits."""
    for source, workers in bank.WORKERS.items():
        for w in range(workers):
            handle = rt.input(source, w)
            if handle.epoch != epoch:
                continue  # past it already, or the held worker waiting at the late epoch
            files = data.files(source, epoch, w)
            if (source, w) == HELD and epoch == data.late_epoch:
                handle.send(files[0])
                continue
            for path in files:
                handle.send(path)
            handle.advance_to(epoch + 1)


def release_late(rt: Runtime, data: DemoData, through: int) -> None:
    """The held worker sends its late file, advances past the late epoch, and sends its files
    of every epoch after it through ``through`` (the others have sent those already)."""
    source, w = HELD
    handle = rt.input(source, w)
    if handle.epoch != data.late_epoch:
        return
    for path in data.files(source, data.late_epoch, w)[1:]:
        handle.send(path)
    handle.advance_to(data.late_epoch + 1)
    for epoch in range(data.late_epoch + 1, through + 1):
        for path in data.files(source, epoch, w):
            handle.send(path)
        handle.advance_to(epoch + 1)


def release(rt: Runtime, data: DemoData) -> None:
    """The held worker sends what it held back and every epoch after it; every worker sends
    every epoch left, then closes."""
    release_late(rt, data, data.late_epoch)
    for epoch in range(data.epochs):
        send_epoch(rt, data, epoch)
    for src, workers in bank.WORKERS.items():
        for worker in range(workers):
            rt.input(src, worker).close()


def correct(rt: Runtime, data: DemoData, epoch: int, scratch: Path) -> None:
    """A correction: wire worker 0 re-delivers its file at ``epoch`` with every amount raised by
    100 cents. The raw file is replaced too, so the oracle reads what the pipeline was sent."""
    (raw,) = data.files("wire_transfers", epoch, 0)
    table = pq.read_table(raw)
    amounts = pc.add(table.column("amount_cents"), 100)
    fixed = table.set_column(table.schema.get_field_index("amount_cents"), "amount_cents", amounts)
    scratch.mkdir(parents=True, exist_ok=True)
    sent = scratch / f"wires-{epoch}-{len(list(scratch.iterdir()))}.parquet"
    pq.write_table(fixed, sent)
    rt.input("wire_transfers", 0).correct(epoch, sent)
    pq.write_table(fixed, raw)


def ancestors(rt: Runtime, stage: str) -> list[str]:
    """The stages ``stage`` reads from, directly or not, that are run (not sources), upstream
    first."""
    found: set[str] = set()
    todo = list(rt.pipeline.stage(stage).inputs)
    while todo:
        name = todo.pop()
        if name not in found:
            found.add(name)
            todo += rt.pipeline.stage(name).inputs
    depths = rt.graph.depths()
    run = [s for s in found if not rt.pipeline.stage(s).is_source]
    return sorted(run, key=lambda s: depths[s])


def run_before(rt: Runtime, stage: str, epochs: Sequence[int]) -> None:
    """Run, at each of ``epochs``, every stage ``stage`` reads from (not ``stage`` itself)."""
    for epoch in epochs:
        for name in ancestors(rt, stage):
            rt.run_stage(name, epoch)
