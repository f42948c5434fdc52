"""The results file: each plot linked by its path from the results file's directory, wherever
either was written, plots beside the results file by default, and a section written to a new
file in a new directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bench.scripts import load

pytestmark = pytest.mark.unit


def test_plots_go_beside_the_results_file_unless_given() -> None:
    results_file = load("results_file")
    assert results_file.plots_beside(Path("bench/RESULTS.md"), None) == Path("bench/plots")
    assert results_file.plots_beside(Path("/tmp/r.md"), Path("/x/p")) == Path("/x/p")


def test_a_plot_is_linked_from_the_results_files_directory(tmp_path: Path) -> None:
    links = load("results_file").plot_links
    results = tmp_path / "out" / "RESULTS.md"
    assert links(results, [tmp_path / "out" / "plots" / "a.png"]) == ["![a](plots/a.png)"]
    # A results file away from the plots (a run with --results elsewhere) links them back.
    assert links(results, [tmp_path / "plots" / "b.png"]) == ["![b](../plots/b.png)"]


def test_a_section_goes_to_a_new_file_in_a_new_directory_and_replaces_itself(
    tmp_path: Path,
) -> None:
    results_file = load("results_file")
    path = tmp_path / "new" / "RESULTS.md"
    results_file.write_section(path, "bench_x", "## x\n\n- one")
    results_file.write_section(path, "bench_y", "## y")
    results_file.write_section(path, "bench_x", "## x\n\n- two")
    text = path.read_text()
    assert text.startswith(results_file.HEADER)
    assert "- one" not in text
    assert text.index("- two") < text.index("## y")  # replaced where it was
