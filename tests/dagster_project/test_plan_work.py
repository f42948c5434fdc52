"""What the frontier sensor asks to run, given the ledger's status of each stage."""

from __future__ import annotations

import pytest

from pipelines.run.planning import plan_work
from progress import Time
from progress.ledger import StageStatus

pytestmark = pytest.mark.dagster


def status(
    stage: str,
    *,
    ready: tuple[Time, ...] = (),
    stale: tuple[Time, ...] = (),
    is_input: bool = False,
) -> StageStatus:
    return StageStatus("bank", stage, is_input, (), (), ready, (), (), stale=stale)


def test_ready_and_stale_stages_run_per_epoch_upstream_first() -> None:
    statuses = [
        status("cards", is_input=True),
        status("valid_cards", ready=(1,)),
        status("valid_wires", ready=(0,)),
        status("movements", ready=(0,), stale=(1,)),
    ]
    assert plan_work(statuses, {}) == {
        1: ("valid_cards", "movements"),
        0: ("valid_wires", "movements"),
    }


def test_stages_in_flight_at_an_epoch_are_left_out_there_only() -> None:
    statuses = [status("valid_cards", ready=(0,)), status("valid_wires", ready=(0,), stale=(1,))]
    assert plan_work(statuses, {0: {"valid_wires"}}) == {0: ("valid_cards",), 1: ("valid_wires",)}


def test_a_stage_that_carries_state_runs_one_epoch_at_a_time() -> None:
    balances = status("balances", ready=(3,), stale=(2, 1))
    assert plan_work([balances], {}, {"balances"}) == {1: ("balances",)}
    assert plan_work([status("balances", ready=(3,))], {}, {"balances"}) == {3: ("balances",)}
    assert plan_work([balances], {1: {"balances"}}, {"balances"}) == {}
