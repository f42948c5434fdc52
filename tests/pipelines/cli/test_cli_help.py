"""The parser as a whole: every command listed and saying what it does, dispatched one way, and
each shared option the same wherever it appears."""

from __future__ import annotations

import argparse
import inspect
import subprocess
import sys
from collections.abc import Iterator

import pytest

from pipelines.cli.main import build_parser, main

pytestmark = pytest.mark.unit


def subcommands(parser: argparse.ArgumentParser) -> dict[str, tuple[str, argparse.ArgumentParser]]:
    """A parser's commands: name -> (its line in the parser's list, its parser)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            lines = {a.dest: a.help or "" for a in action._choices_actions}
            return {name: (lines.get(name, ""), p) for name, p in action.choices.items()}
    return {}


def commands(
    parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], str, argparse.ArgumentParser]]:
    """Every command and command group, depth first: (its words, its help, its parser)."""
    for name, (line, sub) in subcommands(parser).items():
        yield (*prefix, name), line, sub
        yield from commands(sub, (*prefix, name))


def test_every_command_is_listed_and_says_what_it_does(capsys: pytest.CaptureFixture[str]) -> None:
    parser = build_parser()
    with pytest.raises(SystemExit):
        main(["--help"])
    top = capsys.readouterr().out
    found = list(commands(parser))
    assert len(found) >= 25
    for words, line, sub in found:
        assert line, f"{' '.join(words)} has no help line"
        if len(words) == 1:
            assert f"    {words[0]} " in top or f"    {words[0]}\n" in top, words
        else:  # listed by its group's line in `epochgate --help`, and in the group's own help
            group_line = subcommands(parser)[words[0]][0]
            assert words[-1] in group_line, f"{' '.join(words)} is not named by {group_line!r}"
        with pytest.raises(SystemExit):
            main([*words, "--help"])
        description = sub.description or ""
        assert description[:1].isupper(), words
        own = "".join(capsys.readouterr().out.split())  # as wrapped anywhere
        assert "".join(description.split()) in own, words


def test_every_command_is_run_by_a_handler_of_its_arguments() -> None:
    for words, _, sub in commands(build_parser()):
        if subcommands(sub):
            assert sub.get_default("handler") is None, words  # a group is not a command
            continue
        handler = sub.get_default("handler")
        assert handler is not None, f"{' '.join(words)} has no handler"
        assert list(inspect.signature(handler).parameters) == ["args"], words


SHARED = ("-p", "--spark", "--worker", "--ledger", "--lock-timeout", "--data", "--json")


def test_each_shared_option_is_declared_once() -> None:
    """Wherever it appears, an option has one type, one metavar and one help (a command may
    only say another default)."""
    seen: dict[str, set[tuple[object, ...]]] = {flag: set() for flag in SHARED}
    for _, _, sub in commands(build_parser()):
        for action in sub._actions:
            for flag in set(action.option_strings) & set(SHARED):
                meaning = (action.help or "").split(" (default: ")[0]
                seen[flag].add((action.type, action.metavar, meaning, action.nargs))
    for flag, forms in seen.items():
        assert len(forms) == 1, f"{flag} is declared {len(forms)} ways: {forms}"


def test_python_m_runs_the_command_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pipelines.cli.main", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert "epochgate init" not in done.stdout  # the list, not the usage of one command
    assert "    init " in done.stdout
