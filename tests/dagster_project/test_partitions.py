"""Epoch partition keys: zero-padded so they sort as epochs do, and refused when malformed."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dagster_project.partitions import (
    KEY_WIDTH,
    EpochKeyError,
    epoch_key,
    epoch_partitions,
    key_epoch,
)

pytestmark = pytest.mark.dagster

EPOCHS = st.integers(min_value=0, max_value=10**KEY_WIDTH - 1)


@given(EPOCHS)
def test_a_key_gives_back_its_epoch(epoch: int) -> None:
    assert key_epoch(epoch_key(epoch)) == epoch
    assert len(epoch_key(epoch)) == KEY_WIDTH


@given(EPOCHS, EPOCHS)
def test_keys_sort_as_their_epochs(a: int, b: int) -> None:
    assert (epoch_key(a) < epoch_key(b)) == (a < b)


@pytest.mark.parametrize("epoch", [-1, 10**KEY_WIDTH, 1.0, True, "3"])
def test_an_epoch_without_a_key_is_refused(epoch: object) -> None:
    with pytest.raises(EpochKeyError, match="has no partition key"):
        epoch_key(epoch)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "key", ["", "7", "00000000000x", "0000000000007", "-00000000007", "\u0660" * 12]
)
def test_a_key_that_is_not_an_epoch_key_is_refused(key: str) -> None:
    with pytest.raises(EpochKeyError, match="is not an epoch key"):
        key_epoch(key)


def test_each_pipeline_has_its_own_partitions() -> None:
    assert epoch_partitions("bank").name == "bank_epochs"
    assert epoch_partitions("shop").name != epoch_partitions("bank").name
