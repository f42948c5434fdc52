"""References to a pipeline's code, and the choice of the pipeline a command means."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines.cli.references import choose, choose_names, load
from pipelines.errors import PipelineChoiceError, PipelineReferenceError
from progress.ledger import Registration
from tests.fixtures.clicks import REFERENCE

pytestmark = pytest.mark.unit

LEDGER = Path("/data/ledger.duckdb")


def test_load_an_example_or_module_attribute() -> None:
    bank = load("bank")
    assert (bank.name, bank.definition) == ("bank", "bank")
    clicks = load(REFERENCE)
    assert (clicks.name, clicks.definition) == ("clicks", REFERENCE)


@pytest.mark.parametrize(
    ("reference", "reason"),
    [
        ("bnak", "give an example (bank) or module:attribute"),
        ("tests.pipelines.nothing:pipeline", "No module named 'tests.pipelines.nothing'"),
        ("tests.fixtures.clicks:nothing", "has no attribute 'nothing'"),
        ("tests.fixtures.clicks:CLICKS", "it is a StructType, not a Pipeline"),
    ],
)
def test_a_reference_that_loads_nothing_says_why(reference: str, reason: str) -> None:
    with pytest.raises(PipelineReferenceError, match=f"cannot load pipeline '{reference}'") as err:
        load(reference)
    assert reason in err.value.reason


def test_choose_by_registered_name_reference_or_the_only_one() -> None:
    clicks = [Registration("clicks", REFERENCE)]
    assert choose(clicks, None, LEDGER).name == "clicks"
    assert choose(clicks, "clicks", LEDGER).definition == REFERENCE
    assert choose(clicks, "bank", LEDGER).definition == "bank"  # not registered: an example
    # Registered from Python under an example's name: the example's code.
    assert choose([Registration("bank")], "bank", LEDGER).definition == "bank"
    with pytest.raises(PipelineChoiceError) as err:
        choose([Registration("clicks", "bank")], None, LEDGER)
    assert err.value.reason == (
        "pipeline 'clicks' was registered from 'bank', which now defines pipeline 'bank': "
        "pass -p module:attribute"
    )
    with pytest.raises(PipelineChoiceError) as err:
        choose([Registration("clicks")], "clicks", LEDGER)
    assert err.value.given == "clicks"


def test_read_only_commands_filter_by_name_or_reference() -> None:
    both = [Registration("bank", "bank"), Registration("clicks", REFERENCE)]
    assert choose_names(both, None, LEDGER) == ["bank", "clicks"]
    assert choose_names(both, REFERENCE, LEDGER) == ["clicks"]
    assert choose_names([Registration("clicks")], REFERENCE, LEDGER) == ["clicks"]  # by loading
    with pytest.raises(PipelineChoiceError) as err:
        choose_names(both[:1], REFERENCE, LEDGER)
    assert err.value.reason == (
        f"pipeline 'clicks' (from '{REFERENCE}') is not registered in {LEDGER}; registered: bank"
    )
    with pytest.raises(PipelineChoiceError) as err:
        choose_names(both[1:], "bank", LEDGER)
    assert err.value.reason == f"pipeline 'bank' is not registered in {LEDGER}; registered: clicks"
