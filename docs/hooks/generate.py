"""The docs' generated parts, made when the site is built: the command line reference from the
``epochgate`` argparse parser, the error hierarchy from ``pipelines.errors``, the files
``epochgate init`` writes, and the benchmark results page taken from ``bench/``.

A page asks for a part with a marker alone on a line (``<!-- epochgate:cli -->``,
``<!-- epochgate:errors -->``, ``<!-- epochgate:scaffold -->``); nothing is kept by hand.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import inspect
import io
import re
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
BENCH_FILES = ("bench/RESULTS.md", "bench/plots/*.png")
"""Shown in the site as they are in the repository (the figures are never copied into docs/)."""
WIDTH = 80
"""Columns of a rendered usage line (a code block's width on the page)."""
SCAFFOLD_NAME = "iot"
"""The project the tutorial creates: ``epochgate init iot``."""
SCAFFOLD_SUFFIXES = {".py": "python", ".toml": "toml", ".yaml": "yaml", ".md": "markdown"}
SCAFFOLD_ORDER = ("pipeline.py", "definitions.py", "test_", "conftest.py", "workspace.yaml")
"""The files a reader wants first; the others follow in name order."""

MARKER = re.compile(r"^<!-- epochgate:([a-z]+) -->$", re.M)


# -- the command line ------------------------------------------------------------------------


def _subcommands(parser: argparse.ArgumentParser) -> Iterator[tuple[str, str, Any]]:
    """``(name, help, subparser)`` of each command ``parser`` dispatches to, in order."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, sub in action.choices.items():
                yield name, helps.get(name, ""), sub


def _expanded(action: argparse.Action, prog: str) -> str:
    """An action's help with argparse's ``%(default)s``-style fields filled in."""
    text = action.help or ""
    if "%(" in text:
        text = text % {**vars(action), "prog": prog}
    return text


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _argument_rows(parser: argparse.ArgumentParser) -> list[str]:
    rows = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
            continue
        if action.option_strings:
            shown = ", ".join(f"`{o}`" for o in action.option_strings)
            if action.nargs != 0:
                metavar = action.metavar or action.dest.upper()
                shown += f" `{metavar}`"
        else:
            shown = f"`{action.metavar or action.dest}`"
        details = []
        if action.choices is not None:
            details.append("one of " + ", ".join(f"`{c}`" for c in action.choices))
        if action.required and action.option_strings:
            details.append("required")
        help_text = _expanded(action, parser.prog)
        if help_text == argparse.SUPPRESS:
            continue
        cell = "; ".join([help_text, *details]) if help_text else "; ".join(details)
        rows.append(f"| {shown} | {_cell(cell)} |")
    return rows


def _usage(parser: argparse.ArgumentParser) -> str:
    parser.formatter_class = lambda prog: argparse.HelpFormatter(prog, width=WIDTH)
    return parser.format_usage().strip()


def cli_markdown(parser: argparse.ArgumentParser) -> str:
    """Every command of ``parser`` and each of its arguments, as Markdown sections."""
    lines: list[str] = []

    def command(name: str, help_text: str, sub: argparse.ArgumentParser, depth: int) -> None:
        lines.extend([f"{'#' * depth} `{sub.prog}`", ""])
        if help_text:
            lines.extend([help_text[0].upper() + help_text[1:] + ".", ""])
        if sub.description and sub.description.rstrip(".") != help_text.rstrip("."):
            lines.extend([sub.description, ""])
        lines.extend(["```text", _usage(sub), "```", ""])
        rows = _argument_rows(sub)
        if rows:
            lines.extend(["| argument | meaning |", "|---|---|", *rows, ""])
        for child, child_help, child_parser in _subcommands(sub):
            command(child, child_help, child_parser, depth + 1)

    description = parser.description or ""
    lines.extend([description, "", "```text", _usage(parser), "```", ""])
    rows = _argument_rows(parser)
    if rows:
        lines.extend(["| argument | meaning |", "|---|---|", *rows, ""])
    for name, help_text, sub in _subcommands(parser):
        command(name, help_text, sub, 2)
    return "\n".join(lines)


def command_names(parser: argparse.ArgumentParser) -> list[str]:
    """Every command's full name (``epochgate capture start``), for the docs test."""
    found: list[str] = []

    def walk(p: argparse.ArgumentParser) -> None:
        for _, _, sub in _subcommands(p):
            found.append(sub.prog)
            walk(sub)

    walk(parser)
    return found


# -- errors ------------------------------------------------------------------------------------


def _summary(cls: type) -> str:
    doc = inspect.getdoc(cls) or ""
    return " ".join(doc.split("\n\n")[0].split())


def errors_markdown() -> str:
    """The classes of ``pipelines.errors.__all__`` as a tree under ``EpochgateError``, each
    with the first paragraph of its docstring."""
    errors = importlib.import_module("pipelines.errors")
    classes: dict[str, type] = {name: getattr(errors, name) for name in errors.__all__}
    listed = set(classes.values())
    lines: list[str] = []

    def parent_of(cls: type) -> type | None:
        return next((b for b in cls.__mro__[1:] if b in listed), None)

    def walk(cls: type, depth: int) -> None:
        summary = _summary(cls)
        text = f"{'    ' * depth}- `{cls.__name__}`" + (f": {summary}" if summary else "")
        lines.append(text)
        for child in classes.values():
            if parent_of(child) is cls:
                walk(child, depth + 1)

    for root in [c for c in classes.values() if parent_of(c) is None]:
        walk(root, 0)
    return "\n".join(lines)


# -- the files of ``epochgate init`` -----------------------------------------------------------


def _rank(name: str) -> int:
    return next(
        (i for i, start in enumerate(SCAFFOLD_ORDER) if name.startswith(start)),
        len(SCAFFOLD_ORDER),
    )


def scaffold_markdown() -> str:
    """Each file ``epochgate init iot`` writes, under its path, as it writes it."""
    main = importlib.import_module("pipelines.cli.main")
    with tempfile.TemporaryDirectory(prefix="epochgate-docs-") as tmp:
        target = Path(tmp) / SCAFFOLD_NAME
        with contextlib.redirect_stdout(io.StringIO()):  # its list of files: shown below
            status = main.main(["init", str(target)])
        if status != 0:
            raise RuntimeError(f"epochgate init {target} exited {status}")
        files = sorted(
            (p for p in target.rglob("*") if p.is_file() and "__pycache__" not in p.parts),
            key=lambda p: (_rank(p.name), p.relative_to(target).as_posix()),
        )
        lines: list[str] = []
        for path in files:
            language = SCAFFOLD_SUFFIXES.get(path.suffix, "text")
            relative = path.relative_to(target).as_posix()
            fence = "````" if language == "markdown" else "```"
            lines.extend(
                [
                    f'=== "{relative.replace("_", "&#95;")}"',
                    "",
                    *[
                        f"    {line}" if line else ""
                        for line in [
                            f'{fence}{language} title="{SCAFFOLD_NAME}/{relative}"',
                            *path.read_text().splitlines(),
                            fence,
                        ]
                    ],
                    "",
                ]
            )
        return "\n".join(lines)


# -- mkdocs hooks ------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    main = importlib.import_module("pipelines.cli.main")
    parser: argparse.ArgumentParser = main.build_parser()
    return parser


PARTS: dict[str, Callable[[], str]] = {
    "cli": lambda: cli_markdown(_parser()),
    "errors": errors_markdown,
    "scaffold": scaffold_markdown,
}


def expand(markdown: str) -> str:
    """``markdown`` with each marker replaced by the part it names."""

    def part(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in PARTS:
            raise ValueError(f"unknown docs marker {match.group(0)!r}; known: {sorted(PARTS)}")
        return PARTS[name]()

    return MARKER.sub(part, markdown)


def on_page_markdown(markdown: str, **_: Any) -> str:
    return expand(markdown)


def on_files(files: Any, config: Any) -> Any:
    """The benchmark results and their plots, from ``bench/`` as they are."""
    from mkdocs.structure.files import File

    for pattern in BENCH_FILES:
        for path in sorted(ROOT.glob(pattern)):
            files.append(
                File(
                    path.relative_to(ROOT).as_posix(),
                    str(ROOT),
                    config["site_dir"],
                    config["use_directory_urls"],
                )
            )
    return files
