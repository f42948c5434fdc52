"""The partial-state bench in its fast form: every figure is measured and printed (the figures
themselves are for the full form, ``BENCH_SIZE=full``, never asserted in a test)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tests.bench.scripts import load

pytestmark = pytest.mark.spark


def test_the_fast_form_prints_every_figure_with_its_goal(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    module = load("bench_partial")
    module.run(module.SIZES["fast"], spark, tmp_path)
    out = capsys.readouterr().out
    for figure in (
        "balances: state bytes partial / full",
        "per_account: state bytes partial / full",
        "balances: per-epoch time partial / full",
        "per_account: per-epoch time partial / full",
        "balances: lookup hit, median",
        "per_account: lookup hit, median",
        "per_account: rebuilding the full twin / one miss",
        "balances: rebuilding the full twin / one miss",
        "new partial view's first read vs full view's backfill",
        "per_account: one key's upquery at 2 / at 1 epochs",
    ):
        line = next((x for x in out.splitlines() if x.startswith(figure)), None)
        assert line is not None, f"{figure!r} not printed:\n{out}"
        assert "(goal " in line
