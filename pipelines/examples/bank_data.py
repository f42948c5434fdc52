"""Seeded synthetic inputs for ``bank``, and the same computation in plain DuckDB SQL.

Files: ``{root}/{source}/epoch={e}/worker={w}/part-{p}.parquet`` and ``{root}/accounts.parquet``.
``generate`` is deterministic for a seed; ``oracle`` reads the raw files and returns what each
stage must hold at an epoch, as ``(columns, sorted rows)``, and the balances of some accounts as
of an epoch (what a lookup of the partial ``balances`` must answer).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from pipelines.examples.bank import RING_MIN_CENTS, WORKERS

CATEGORIES = ["groceries", "travel", "fuel", "dining", "utilities", None]
REGIONS = ["north", "south", "east", "west"]
HOLDERS = ["Ann", "Bob", "O'Neil", 'the "Best" Co', "Zoë"]  # quotes and accents on purpose
CARD_SHARE = 0.8

CARD_ARROW = pa.schema(
    [
        ("payment_id", pa.int64()),
        ("account_id", pa.int64()),
        ("merchant_category", pa.string()),
        ("amount_cents", pa.int64()),
    ]
)
WIRE_ARROW = pa.schema(
    [
        ("transfer_id", pa.int64()),
        ("from_account", pa.int64()),
        ("to_account", pa.int64()),
        ("amount_cents", pa.int64()),
    ]
)
ACCOUNT_ARROW = pa.schema(
    [("account_id", pa.int64()), ("holder", pa.string()), ("region", pa.string())]
)


@dataclass(frozen=True)
class DemoData:
    root: Path
    epochs: int
    late_epoch: int

    def without_regions(self) -> Path:
        """The accounts file with the region of every fifth account missing: the bad file the
        demo sends once (``enriched`` expects a region)."""
        path = self.root / "accounts-without-regions.parquet"
        table = pq.read_table(self.root / "accounts.parquet")
        regions = [
            None if i % 5 == 0 else region
            for i, region in enumerate(table.column("region").to_pylist())
        ]
        index = table.schema.get_field_index("region")
        pq.write_table(table.set_column(index, "region", pa.array(regions, pa.string())), path)
        return path

    def files(self, source: str, epoch: int, worker: int) -> list[Path]:
        """The files one worker sends for one epoch, in order (the late part last)."""
        if source == "accounts":
            return [self.root / "accounts.parquet"]
        folder = self.root / source / f"epoch={epoch}" / f"worker={worker}"
        return sorted(folder.glob("part-*.parquet"))


def generate(root: Path, *, epochs: int, rows: int, accounts: int, seed: int) -> DemoData:
    """Write ``epochs`` epochs of about ``rows`` rows each. One card worker also has a late
    second file at ``late_epoch`` (the demo sends it after holding that epoch open)."""
    rnd = random.Random(seed)
    root.mkdir(parents=True, exist_ok=True)
    pq.write_table(
        pa.table(
            {
                "account_id": list(range(accounts)),
                "holder": [f"{HOLDERS[i % len(HOLDERS)]} #{i}" for i in range(accounts)],
                "region": [REGIONS[i % len(REGIONS)] for i in range(accounts)],
            },
            schema=ACCOUNT_ARROW,
        ),
        root / "accounts.parquet",
    )
    late_epoch = min(2, epochs - 1)
    cards_per_worker = max(1, int(rows * CARD_SHARE) // WORKERS["card_payments"])
    wires_per_worker = max(1, int(rows * (1 - CARD_SHARE)) // WORKERS["wire_transfers"])
    for epoch in range(epochs):
        for w in range(WORKERS["card_payments"]):
            parts = 2 if (epoch == late_epoch and w == WORKERS["card_payments"] - 1) else 1
            for part in range(parts):
                base = ((epoch * 8 + w) * 4 + part) * 10_000_000
                n = cards_per_worker // parts
                table = {
                    "payment_id": [base + i for i in range(n)],
                    "account_id": [rnd.randrange(accounts) for _ in range(n)],
                    "merchant_category": [rnd.choice(CATEGORIES) for _ in range(n)],
                    "amount_cents": [rnd.randint(-500, 50_000) for _ in range(n)],
                }
                _write(root, "card_payments", epoch, w, part, pa.table(table, schema=CARD_ARROW))
        for w in range(WORKERS["wire_transfers"]):
            base = (epoch * 8 + w) * 10_000_000
            n = wires_per_worker
            table = {
                "transfer_id": [base + i for i in range(n)],
                "from_account": [rnd.randrange(accounts) for _ in range(n)],
                "to_account": [rnd.randrange(accounts) for _ in range(n)],
                "amount_cents": [rnd.randint(-100, 200_000) for _ in range(n)],
            }
            _write(root, "wire_transfers", epoch, w, 0, pa.table(table, schema=WIRE_ARROW))
    return DemoData(root, epochs, late_epoch)


def _write(root: Path, source: str, epoch: int, worker: int, part: int, table: pa.Table) -> None:  # noqa: PLR0917 (a file's coordinates)
    folder = root / source / f"epoch={epoch}" / f"worker={worker}"
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, folder / f"part-{part}.parquet")


ORACLE_SQL = {
    "valid_cards": """
        SELECT 'c' || payment_id AS movement_id, account_id, -amount_cents AS amount_cents,
               merchant_category AS category
        FROM cards WHERE epoch = $e AND amount_cents > 0 AND merchant_category IS NOT NULL""",
    "valid_wires": """
        SELECT movement_id, account_id, amount_cents, category FROM wire_movements
        WHERE epoch = $e""",
    "movements": """
        SELECT movement_id, account_id, amount_cents, category FROM movements
        WHERE epoch = $e""",
    "category_totals": """
        SELECT category, sum(amount_cents) AS total_cents, count(*) AS movements
        FROM movements WHERE epoch = $e GROUP BY category""",
    "balances": """
        SELECT account_id, sum(amount_cents) AS balance_cents, count(*) AS movements
        FROM movements
        WHERE epoch <= $e AND account_id IN (SELECT account_id FROM movements WHERE epoch = $e)
        GROUP BY account_id""",
    "enriched": """
        SELECT account_id, movement_id, amount_cents, category, holder, region
        FROM movements JOIN accounts USING (account_id) WHERE epoch = $e""",
    "region_totals": """
        SELECT region, sum(amount_cents) AS total_cents
        FROM movements JOIN accounts USING (account_id) WHERE epoch = $e GROUP BY region""",
    # Connected components as a transitive closure (not label propagation).
    "rings": f"""
        WITH RECURSIVE links(a, b) AS (
            SELECT from_account, to_account FROM wires
            WHERE epoch = $e AND amount_cents >= {RING_MIN_CENTS} AND from_account <> to_account
            UNION
            SELECT to_account, from_account FROM wires
            WHERE epoch = $e AND amount_cents >= {RING_MIN_CENTS} AND from_account <> to_account
        ),
        reach(account_id, other) AS (
            SELECT a, a FROM links
            UNION
            SELECT r.account_id, l.b FROM reach r JOIN links l ON r.other = l.a
        )
        SELECT account_id, min(other) AS ring_id FROM reach GROUP BY account_id""",
}


QUARANTINE_SQL = {
    "valid_cards": """
        SELECT 'c' || payment_id AS movement_id, account_id, -amount_cents AS amount_cents,
               merchant_category AS category
        FROM cards WHERE epoch = $e AND amount_cents <= 0 AND merchant_category IS NOT NULL""",
}
"""The rows each stage's ``drop`` expectations keep out of its output at an epoch."""


BALANCES_AS_OF_SQL = """
    SELECT account_id, sum(amount_cents) AS balance_cents, count(*) AS movements
    FROM movements WHERE epoch <= $e AND list_contains($accounts, account_id)
    GROUP BY account_id"""
"""The state of ``balances`` after epoch ``$e`` for the accounts ``$accounts``."""


class Oracle:
    """Each stage of ``bank`` at an epoch, computed in DuckDB from the raw input files."""

    def __init__(self, root: Path) -> None:
        self.con = duckdb.connect()
        self.con.read_parquet(
            str(root / "card_payments" / "*" / "*" / "*.parquet"), hive_partitioning=True
        ).create_view("cards")
        self.con.read_parquet(
            str(root / "wire_transfers" / "*" / "*" / "*.parquet"), hive_partitioning=True
        ).create_view("wires")
        self.con.read_parquet(str(root / "accounts.parquet")).create_view("accounts")
        self.con.execute(
            """
            CREATE VIEW wire_movements AS
            SELECT epoch, 'w' || transfer_id || '-out' AS movement_id, from_account AS account_id,
                   -amount_cents AS amount_cents, 'transfer' AS category
            FROM wires WHERE amount_cents > 0 AND from_account <> to_account
            UNION ALL
            SELECT epoch, 'w' || transfer_id || '-in', to_account, amount_cents, 'transfer'
            FROM wires WHERE amount_cents > 0 AND from_account <> to_account
            """
        )
        self.con.execute(
            """
            CREATE VIEW movements AS
            SELECT epoch, 'c' || payment_id AS movement_id, account_id,
                   -amount_cents AS amount_cents, merchant_category AS category
            FROM cards WHERE amount_cents > 0 AND merchant_category IS NOT NULL
            UNION ALL SELECT * FROM wire_movements
            """
        )

    def expected(
        self, stage: str, epoch: int, *, quarantine: bool = False
    ) -> tuple[list[str], list[tuple[Any, ...]]]:
        """``(columns, sorted rows)`` of ``stage`` at ``epoch``: its output, or the rows its
        expectations dropped (``QUARANTINE_SQL``)."""
        cursor = self.con.execute(
            (QUARANTINE_SQL if quarantine else ORACLE_SQL)[stage], {"e": epoch}
        )
        columns = [d[0] for d in cursor.description]
        return columns, sorted(cursor.fetchall(), key=_sort_key)

    def balances_as_of(self, accounts: list[int], epoch: int) -> list[tuple[Any, ...]]:
        """``(account_id, balance_cents, movements)`` after ``epoch`` of each of ``accounts``
        that has moved by then, sorted."""
        rows = self.con.execute(BALANCES_AS_OF_SQL, {"e": epoch, "accounts": accounts}).fetchall()
        return sorted(rows, key=_sort_key)

    def some_accounts(self, count: int = 4) -> list[int]:
        """``count`` accounts with movements, spread over the ids (the same for the same
        inputs)."""
        found = self.con.execute("SELECT DISTINCT account_id FROM movements ORDER BY 1").fetchall()
        ids = [int(r[0]) for r in found]
        step = max(1, len(ids) // max(count, 1))
        return ids[::step][:count]

    def input_rows(self) -> int:
        cards = self.con.execute("SELECT count(*) FROM cards").fetchone()
        wires = self.con.execute("SELECT count(*) FROM wires").fetchone()
        return int(cards[0] if cards else 0) + int(wires[0] if wires else 0)


def _sort_key(row: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple((v is None, "" if v is None else v) for v in row)
