"""The connect bench's measuring and reporting, with its runs and its server replaced by
stand-ins (a real run starts a JVM per run and a Spark Connect server: tens of seconds even at
one run per side): every figure is printed, the server is stopped even when a run fails, and
the section is written beside another script's."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.bench.scripts import load, results_beside_another, section_of

pytestmark = pytest.mark.unit

FIGURES = (
    "new local session (local[2], a JVM of its own): median 6.00s (spread 5.00-7.00 over 3)",
    "Spark Connect client to a running server: median 2.00s (spread 1.50-2.50 over 3)",
    "Spark Connect server start: ",
    "ratio local / connect: 3.0x (of the medians; no goal set)",
)


class Server:
    """Stands in for ``pipelines.spark.connect_server``: records what was started and stopped."""

    def __init__(self) -> None:
        self.started: list[int] = []
        self.stopped: list[int] = []

    def start(self, port: int, **_: object) -> SimpleNamespace:
        self.started.append(port)
        return SimpleNamespace(pid=4242, url=f"sc://127.0.0.1:{port}")

    def stop(self, port: int, **_: object) -> bool:
        self.stopped.append(port)
        return True


def runs(seconds: list[float]) -> Iterator[float]:
    yield from seconds
    raise AssertionError("more runs than measured")


def test_the_figures_are_printed_and_the_section_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    module = load("bench_connect")
    server = Server()
    monkeypatch.setattr(module, "connect_server", server)
    seconds = runs([6.0, 5.0, 7.0, 2.0, 1.5, 2.5])
    monkeypatch.setattr(module, "one_run", lambda _master: next(seconds))
    found = module.measure(3, 15999)
    monkeypatch.undo()
    assert server.started == server.stopped == [15999]
    out = capsys.readouterr().out.splitlines()
    for figure in FIGURES:
        assert any(x.startswith(figure) for x in out), f"{figure!r} not printed:\n{out}"
    results = results_beside_another(tmp_path / "RESULTS.md")
    module.write_section(results, "bench_connect", module.connect_section(found, "fast"))
    section = section_of(results, "bench_connect")
    assert "- size: fast; 3 runs per side, " in section
    for figure in FIGURES:
        assert f"- {figure}" in section, section
    assert "s (once, before its runs)\n" in section


def test_the_server_is_stopped_when_a_run_on_it_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    module = load("bench_connect")
    server = Server()
    monkeypatch.setattr(module, "connect_server", server)

    def one_run(master: str) -> float:
        if master.startswith("sc://"):
            raise SystemExit(f"a run on {master} failed (exit 1)")
        return 5.0

    monkeypatch.setattr(module, "one_run", one_run)
    with pytest.raises(SystemExit, match=re.escape("a run on sc://127.0.0.1:15998 failed")):
        module.measure(1, 15998)
    assert server.stopped == [15998]


def test_an_unknown_size_is_refused_before_anything_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    module = load("bench_connect")
    server = Server()
    monkeypatch.setattr(module, "connect_server", server)
    monkeypatch.setenv("BENCH_SIZE", "huge")
    with pytest.raises(SystemExit, match="BENCH_SIZE must be one of fast, full, not 'huge'"):
        module.main(["--results", "/nonexistent/RESULTS.md"])
    assert server.started == []
