"""The ``bank`` example: card payments and wire transfers through validation, a union, running
balances per account (stateful and partial: it keeps the accounts that are read), totals per
merchant category, a join with accounts, and rings of accounts linked by large transfers (an
iterative stage: label propagation to a fixed point). Two expectations: card payments of a
non-positive amount are dropped into quarantine, and a movement of an account without a region
fails the join's run.

Sources: ``card_payments`` (3 workers), ``wire_transfers`` (2 workers), ``accounts`` (the
accounts dimension, re-sent each epoch). Amounts are integer cents, so every sum is exact.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines.stages.pipeline import Pipeline

CARD_PAYMENTS = T.StructType(
    [
        T.StructField("payment_id", T.LongType()),
        T.StructField("account_id", T.LongType()),
        T.StructField("merchant_category", T.StringType()),
        T.StructField("amount_cents", T.LongType()),
    ]
)
WIRE_TRANSFERS = T.StructType(
    [
        T.StructField("transfer_id", T.LongType()),
        T.StructField("from_account", T.LongType()),
        T.StructField("to_account", T.LongType()),
        T.StructField("amount_cents", T.LongType()),
    ]
)
ACCOUNTS = T.StructType(
    [
        T.StructField("account_id", T.LongType()),
        T.StructField("holder", T.StringType()),
        T.StructField("region", T.StringType()),
    ]
)
BALANCES = T.StructType(
    [
        T.StructField("account_id", T.LongType()),
        T.StructField("balance_cents", T.LongType()),
        T.StructField("movements", T.LongType()),
    ]
)
WORKERS = {"card_payments": 3, "wire_transfers": 2, "accounts": 1}
RING_MIN_CENTS = 190_000
"""A transfer at least this large links its two accounts into one ring."""


def card_movements(df: DataFrame) -> DataFrame:
    """Card payments with a category become debits of their account (a payment of a
    non-positive amount is no debit: the expectation ``debit`` drops it into quarantine)."""
    return df.where(F.col("merchant_category").isNotNull()).select(
        F.concat(F.lit("c"), F.col("payment_id").cast("string")).alias("movement_id"),
        "account_id",
        (-F.col("amount_cents")).alias("amount_cents"),
        F.col("merchant_category").alias("category"),
    )


def validate_cards(df: DataFrame) -> DataFrame:
    """Valid card payments (a positive amount, a category) become debits of their account:
    what ``valid_cards`` holds, filtered in the function where no expectation can drop rows
    (a stage that is not materialized)."""
    return card_movements(df.where(F.col("amount_cents") > 0))


def validate_wires(df: DataFrame) -> DataFrame:
    """A valid transfer is a debit of the sender and a credit of the receiver."""
    valid = df.where((F.col("amount_cents") > 0) & (F.col("from_account") != F.col("to_account")))
    out = valid.select(
        F.concat(F.lit("w"), F.col("transfer_id").cast("string"), F.lit("-out")).alias(
            "movement_id"
        ),
        F.col("from_account").alias("account_id"),
        (-F.col("amount_cents")).alias("amount_cents"),
        F.lit("transfer").alias("category"),
    )
    into = valid.select(
        F.concat(F.lit("w"), F.col("transfer_id").cast("string"), F.lit("-in")).alias(
            "movement_id"
        ),
        F.col("to_account").alias("account_id"),
        F.col("amount_cents"),
        F.lit("transfer").alias("category"),
    )
    return out.unionByName(into)


def category_totals(df: DataFrame) -> DataFrame:
    return df.groupBy("category").agg(
        F.sum("amount_cents").alias("total_cents"), F.count("*").alias("movements")
    )


def update_balances(batch: DataFrame, state: DataFrame) -> DataFrame:
    """New balances of the accounts that moved this epoch: old balance plus this epoch's sum."""
    moved = batch.groupBy("account_id").agg(
        F.sum("amount_cents").alias("delta"), F.count("*").alias("n")
    )
    joined = moved.join(state, on="account_id", how="left")
    return joined.select(
        "account_id",
        (F.coalesce(F.col("balance_cents"), F.lit(0)) + F.col("delta")).alias("balance_cents"),
        (F.coalesce(F.col("movements"), F.lit(0)) + F.col("n")).alias("movements"),
    )


def _links(wires: DataFrame) -> DataFrame:
    """Both directions of every large transfer between two accounts: ``(a, b)``."""
    large = wires.where(
        (F.col("amount_cents") >= RING_MIN_CENTS) & (F.col("from_account") != F.col("to_account"))
    )
    forth = large.select(F.col("from_account").alias("a"), F.col("to_account").alias("b"))
    back = large.select(F.col("to_account").alias("a"), F.col("from_account").alias("b"))
    return forth.unionByName(back)


def ring_start(wires: DataFrame) -> DataFrame:
    """Round 0: every linked account is its own ring."""
    linked = _links(wires).select(F.col("a").alias("account_id")).distinct()
    return linked.select("account_id", F.col("account_id").alias("ring_id"))


def ring_round(rings: DataFrame, wires: DataFrame) -> DataFrame:
    """One round: each account takes the smallest ring id among itself and its neighbours.
    At the fixed point every ring is named by its smallest account."""
    offers = (
        _links(wires)
        .join(rings, F.col("b") == F.col("account_id"))
        .select(F.col("a").alias("account_id"), "ring_id")
    )
    return rings.unionByName(offers).groupBy("account_id").agg(F.min("ring_id").alias("ring_id"))


def region_totals(df: DataFrame) -> DataFrame:
    return df.groupBy("region").agg(F.sum("amount_cents").alias("total_cents"))


def pipeline(rings: bool = True, *, materialize: bool = True, partial: bool = True) -> Pipeline:
    """The bank pipeline (``rings=False`` leaves out the iterative stage; ``materialize=False``
    leaves the validations unwritten: ``movements`` applies them to the sources' files;
    ``partial=False`` keeps every account's balance, as a full stateful stage). Its
    expectations: a card movement is a debit (else dropped into ``valid_cards``' quarantine),
    and every enriched movement has a region (else the run of ``enriched`` fails)."""
    bank = Pipeline("bank")
    cards = bank.source(
        "card_payments", schema=CARD_PAYMENTS, workers=WORKERS["card_payments"], key=["payment_id"]
    )
    wires = bank.source(
        "wire_transfers",
        schema=WIRE_TRANSFERS,
        workers=WORKERS["wire_transfers"],
        key=["transfer_id", "from_account", "to_account"],
    )
    accounts = bank.source("accounts", schema=ACCOUNTS, workers=1, key=["account_id"])
    cards_fn = card_movements if materialize else validate_cards
    valid_cards = bank.transform("valid_cards", cards, fn=cards_fn, materialize=materialize)
    if materialize:
        bank.expect(valid_cards, "debit", "amount_cents < 0", on_fail="drop")
    movements = bank.union(
        "movements",
        valid_cards,
        bank.transform("valid_wires", wires, fn=validate_wires, materialize=materialize),
    )
    bank.transform("category_totals", movements, fn=category_totals)
    bank.stateful(
        "balances",
        movements,
        key=["account_id"],
        schema=BALANCES,
        update=update_balances,
        partial=partial,
    )
    enriched = bank.join("enriched", movements, accounts, on=["account_id"])
    bank.expect(enriched, "region_known", "region IS NOT NULL", on_fail="fail")
    bank.transform("region_totals", enriched, fn=region_totals)
    if rings:
        bank.iterate("rings", wires, init=ring_start, step=ring_round)
    return bank
