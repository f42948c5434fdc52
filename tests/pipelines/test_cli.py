"""The ``epochgate`` console script."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pipelines.cli import main

pytestmark = pytest.mark.unit


def test_help_describes_the_tool(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0
    assert "exact logical time" in capsys.readouterr().out


def test_console_script_is_installed() -> None:
    exe = Path(sys.executable).parent / "epochgate"
    assert exe.exists(), "the epochgate console script is not installed beside the interpreter"
    out = subprocess.run([exe, "--version"], check=True, capture_output=True, text=True)
    assert out.stdout.startswith("epochgate ")
