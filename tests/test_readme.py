"""The README's Python examples run, in order, as a user would paste them (one namespace, a
fresh working directory), on real Spark and a real ledger file."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def python_blocks(text: str) -> list[tuple[int, str]]:
    """Each ```python block of ``text`` with the line its code starts on."""
    return [(text.count("\n", 0, m.start()) + 2, m.group(1)) for m in BLOCK.finditer(text)]


@pytest.mark.unit
def test_every_python_block_is_found() -> None:
    text = "a\n```python\nx = 1\n```\nb\n```sh\nls\n```\n```python\ny = 2\n```\n"
    assert python_blocks(text) == [(3, "x = 1\n"), (10, "y = 2\n")]


@pytest.mark.spark
def test_readme_examples_run(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "readme"}
    blocks = python_blocks(README.read_text())
    assert len(blocks) >= 5
    for line, code in blocks:
        exec(compile(code, f"README.md, block at line {line}", "exec"), namespace)
