"""The one check of an epoch given from outside: to a stage's run, read, revision, backfill or
keyed read. An epoch is an int in ``0 .. MAX_EPOCH`` (``progress.validate_time``); a bool, a
string, a float or a larger int is refused before anything reads the ledger."""

from __future__ import annotations

from pipelines.errors import InvalidEpochError
from progress import InvalidTimeError
from progress.timestamp import validate_time


def epoch_problem(epoch: object) -> str | None:
    """Why ``epoch`` is not an epoch, or ``None`` when it is one.

    >>> epoch_problem(3) is None, epoch_problem(True), epoch_problem(2**63)
    (True, 'expected an int epoch', 'epochs lie in 0 .. 9223372036854775807')
    """
    try:
        validate_time(epoch, 0)
    except InvalidTimeError as err:
        return err.reason
    return None


def stage_epoch(stage: str, epoch: object) -> int:
    """``epoch`` if it is an epoch, else ``InvalidEpochError`` naming ``stage``."""
    problem = epoch_problem(epoch)
    if problem is not None:
        raise InvalidEpochError(stage, epoch, problem)
    assert isinstance(epoch, int)
    return epoch
