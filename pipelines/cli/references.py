"""Which pipeline a command means: ``-p`` as a registered name, an example or ``module:attribute``.

A *reference* says where a pipeline's code is: the name of a shipped example (``bank``) or
``module:attribute`` naming a ``Pipeline`` or a function of no arguments that returns one.
``load`` sets the loaded pipeline's ``definition`` to its reference, and registering the
pipeline records it in the ledger, so later commands can name the pipeline by its registered
name, or not at all while the ledger holds only that one.

``choose`` gives the pipeline a command drives; ``choose_names`` the registered names a
command that only reads the ledger looks at. Neither writes anything.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from pathlib import Path

from pipelines.errors import PipelineChoiceError, PipelineReferenceError
from pipelines.examples import registry
from pipelines.stages.pipeline import Pipeline
from progress.ledger import Registration

__all__ = [
    "PipelineChoiceError",
    "PipelineReferenceError",
    "choose",
    "choose_names",
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
    try:
        target = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as err:
        raise PipelineReferenceError(reference, str(err)) from err
    if callable(target) and not isinstance(target, Pipeline):
        target = target()
    if not isinstance(target, Pipeline):
        raise PipelineReferenceError(reference, f"it is a {type(target).__name__}, not a Pipeline")
    return target


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
