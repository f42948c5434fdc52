"""Which pipeline a command means: ``-p`` as a registered name, an example or ``module:attribute``.

A *reference* says where a pipeline's code is: the name of a shipped example (``bank``) or
``module:attribute`` naming a ``Pipeline`` or a function of no arguments that returns one. The
module is imported with the working directory on the path, as ``python -m`` does, so a
project's own module is found from its directory. ``load`` sets the loaded pipeline's
``definition`` to its reference, and registering the pipeline records it in the ledger, so
later commands can name the pipeline by its registered name, or not at all while the ledger
holds only that one.

``choose`` gives the pipeline a command drives; ``choose_names`` the registered names a
command that only reads the ledger looks at; ``given_reference`` whether ``-p`` was a
reference worth recording. None of them writes anything.
"""

from __future__ import annotations

import importlib
import os
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path

from pipelines.errors import EpochgateError, PipelineChoiceError, PipelineReferenceError
from pipelines.examples import registry
from pipelines.stages.pipeline import Pipeline
from progress.ledger import Registration

__all__ = [
    "PipelineChoiceError",
    "PipelineReferenceError",
    "choose",
    "choose_names",
    "given_reference",
    "is_reference",
    "load",
]


def examples_text() -> str:
    return ", ".join(registry())


def is_reference(text: str) -> bool:
    """Whether ``text`` is written as a reference: an example's name or ``module:attribute``.

    >>> is_reference("bank"), is_reference("shop.defs:pipeline"), is_reference("shop")
    (True, True, False)
    """
    return text in registry() or ":" in text


def load(reference: str) -> Pipeline:
    """The pipeline ``reference`` names, with its ``definition`` set to ``reference``."""
    examples = registry()
    if reference in examples:
        pipeline = examples[reference]()
    elif ":" in reference:
        pipeline = _import(reference)
    else:
        raise PipelineReferenceError(
            reference, f"give an example ({examples_text()}) or module:attribute"
        )
    pipeline.definition = reference
    return pipeline


def _import(reference: str) -> Pipeline:
    module_name, attr = reference.split(":", 1)
    search_working_directory()
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        where = f" (searched from {os.getcwd()} and the Python path)"
        raise PipelineReferenceError(reference, f"{err}{where}") from err
    except EpochgateError:
        raise  # a definition refused while the module defines it says so itself
    except Exception as err:
        raise PipelineReferenceError(reference, failure(err)) from err
    try:
        target = getattr(module, attr)
    except AttributeError as err:
        raise PipelineReferenceError(reference, str(err)) from err
    if callable(target) and not isinstance(target, Pipeline):
        try:
            target = target()
        except EpochgateError:
            raise
        except Exception as err:
            raise PipelineReferenceError(reference, failure(err)) from err
    if not isinstance(target, Pipeline):
        raise PipelineReferenceError(reference, f"it is a {type(target).__name__}, not a Pipeline")
    return target


def search_working_directory() -> None:
    """Put the working directory first on the import path, as ``python -m`` does (a console
    script has its own directory there instead); once, and for the rest of the process: the
    pipeline's functions may import more of the project when they run."""
    here = os.getcwd()
    if here not in sys.path and "" not in sys.path:
        sys.path.insert(0, here)


def failure(err: BaseException) -> str:
    """An error raised by a pipeline's code while it loads, in one line: its type, its text
    and the last place in the code it came from."""
    if isinstance(err, SyntaxError) and err.filename:
        return f"{type(err).__name__}: {err.msg} ({err.filename}, line {err.lineno})"
    text = f"{type(err).__name__}: {err}"
    frames = traceback.extract_tb(err.__traceback__)
    if frames:
        text += f" ({frames[-1].filename}, line {frames[-1].lineno})"
    return text


def choose(registered: Sequence[Registration], given: str | None, ledger: Path) -> Pipeline:
    """The pipeline a command that drives one means.

    ``given`` (``-p``) is a registered name, whose recorded reference is loaded, or a
    reference. Without it, the ledger's only registered pipeline. ``ledger`` is named in
    errors."""
    names = [r.pipeline for r in registered]
    by_name = {r.pipeline: r for r in registered}
    if given is None:
        if not registered:
            raise PipelineChoiceError(
                None,
                ledger,
                names,
                f"no pipeline is registered in {ledger}: pass -p PIPELINE, an example "
                f"({examples_text()}) or module:attribute",
            )
        if len(registered) > 1:
            raise PipelineChoiceError(
                None,
                ledger,
                names,
                f"{len(names)} pipelines are registered in {ledger} ({', '.join(names)}): "
                "pass -p NAME",
            )
        return _registered(registered[0], ledger, names)
    known = by_name.get(given)
    if known is not None and (known.definition is not None or not is_reference(given)):
        return _registered(known, ledger, names)
    if is_reference(given):
        return load(given)
    raise PipelineChoiceError(
        given,
        ledger,
        names,
        f"unknown pipeline {given!r}: not registered in {ledger} "
        f"(registered: {', '.join(names) or 'none'}), not an example ({examples_text()}), "
        "and not module:attribute",
    )


def _registered(registration: Registration, ledger: Path, names: Sequence[str]) -> Pipeline:
    """A registered pipeline, loaded from the reference the ledger recorded for it."""
    name, reference = registration.pipeline, registration.definition
    if reference is None:
        raise PipelineChoiceError(
            name,
            ledger,
            names,
            f"pipeline {name!r} in {ledger} was registered without saying where its code is: "
            "pass -p module:attribute (or the example's name)",
        )
    pipeline = load(reference)
    if pipeline.name != name:
        raise PipelineChoiceError(
            name,
            ledger,
            names,
            f"pipeline {name!r} was registered from {reference!r}, which now defines "
            f"pipeline {pipeline.name!r}: pass -p module:attribute",
        )
    return pipeline


def given_reference(registered: Sequence[Registration], given: str | None) -> str | None:
    """The reference ``given`` (``-p``) is, when a command should record it for a registered
    pipeline: a reference the ledger has not recorded, not a registered name that already says
    where its code is. None otherwise.

    >>> given_reference([Registration("shop", "shop.defs:pipeline")], "shop") is None
    True
    >>> given_reference([Registration("shop")], "shop.defs:pipeline")
    'shop.defs:pipeline'
    """
    if given is None or not is_reference(given):
        return None
    by_name = {r.pipeline: r for r in registered}
    if given in by_name and by_name[given].definition is not None:
        return None  # the registered name, whose code's place is known
    if any(r.definition == given for r in registered):
        return None
    return given


def choose_names(registered: Sequence[Registration], given: str | None, ledger: Path) -> list[str]:
    """The registered pipelines a command that reads the ledger looks at: every one, or the
    one ``given`` (``-p``) names by its registered name or by its reference."""
    names = [r.pipeline for r in registered]
    if given is None:
        return names
    if given in names:
        return [given]
    recorded = [r.pipeline for r in registered if r.definition == given]
    if recorded:
        return recorded
    if is_reference(given):
        name = load(given).name
        if name in names:
            return [name]
        loaded = "" if name == given else f" (from {given!r})"
        reason = f"pipeline {name!r}{loaded} is not registered in {ledger}"
    else:
        reason = f"pipeline {given!r} is not registered in {ledger}"
    raise PipelineChoiceError(
        given, ledger, names, f"{reason}; registered: {', '.join(names) or 'none'}"
    )
