"""The "at a glance" lists of the API reference pages, generated from the docstrings.

mkdocstrings renders ``docs/api/*.md`` only when the site is built, so a reader of the
repository or of an sdist sees directives there, not the API. Each page therefore starts
with a list, between ``<!-- glance:NAME -->`` and ``<!-- /glance:NAME -->``, of what it
documents: each exported name with how it is called and its docstring's summary.
``tests/test_docs.py`` fails when a list differs from what :func:`render` makes of the
code. Regenerate the lists with::

    PYTHONPATH=src:tests python -m helpers.reference_glance
"""

from __future__ import annotations

import enum
import importlib
import inspect
import re
from dataclasses import dataclass
from pathlib import Path

from helpers.reference import exported, modules

DOCS = Path(__file__).parent.parent.parent / "docs"
REGENERATE = "PYTHONPATH=src:tests python -m helpers.reference_glance"


@dataclass(frozen=True)
class Glance:
    """One page's list: the modules it documents, less the names it leaves to another page."""

    name: str
    modules: tuple[str, ...]
    leaves_out: str = "$^"
    """A pattern of names documented on another page."""

    @property
    def page(self) -> Path:
        return DOCS / "api" / f"{self.name}.md"


GLANCES = (
    Glance("sources", ("sources",), leaves_out=r"Error$"),
    Glance("errors", ("sources.errors",)),
    Glance("enumerators", ("enumerators",)),
    Glance("readers", ("readers",)),
    Glance("spark", ("sources.spark", "sources.spark.prometheus")),
    Glance("testing", ("sources.testing", "sources.testing.conformance", "sources.testing.plugin")),
)


def called_as(obj: object, name: str) -> str:
    """How ``obj`` is called: its parameters by name, ``=…`` after the optional ones. A
    value, an enum and a class that is subclassed rather than called (abstract, or taking
    nothing) show their name alone; an error that keeps Python's constructor takes its
    message."""
    if not callable(obj) or isinstance(obj, enum.EnumType) or inspect.isabstract(obj):
        return name
    if isinstance(obj, type) and issubclass(obj, BaseException):
        defining = next(base for base in obj.__mro__ if "__init__" in vars(base))
        if defining.__module__ == "builtins":
            return f"{name}(message)"
    try:
        parameters = inspect.signature(obj).parameters.values()
    except (TypeError, ValueError):
        return name
    if not parameters and isinstance(obj, type):
        return name
    shown = []
    for parameter in parameters:
        stars = {parameter.VAR_POSITIONAL: "*", parameter.VAR_KEYWORD: "**"}
        optional = "=…" if parameter.default is not parameter.empty else ""
        shown.append(f"{stars.get(parameter.kind, '')}{parameter.name}{optional}")
    return f"{name}({', '.join(shown)})"


def render(glance: Glance) -> str:
    """The list of ``glance``'s page, as the code gives it."""
    lines = [
        f"<!-- glance:{glance.name} -->",
        "The entries below are rendered from the docstrings when the site is built "
        "(`./dev docs`); in a checkout or an installed package, `help()` shows the same "
        "text. At a glance:",
        "",
    ]
    for module in glance.modules:
        runtime = importlib.import_module(module)
        for name in exported(module):
            if re.search(glance.leaves_out, name):
                continue
            docstring = modules()[f"{module}.{name}"].docstring
            summary = docstring.value.split("\n", 1)[0].strip() if docstring else ""
            lines.append(f"- `{called_as(getattr(runtime, name), name)}`: {markdown(summary)}")
    lines.append(f"<!-- /glance:{glance.name} -->")
    return "\n".join(lines)


def markdown(summary: str) -> str:
    """A docstring's reStructuredText as Markdown: a role (``:class:`~a.B```) becomes the
    code of its name (``B`` after a ``~``), a double-backquoted literal single-quoted."""
    summary = re.sub(
        r":[a-z]+:`(~?)([^`]+)`",
        lambda role: f"`{role.group(2).rsplit('.', 1)[-1] if role.group(1) else role.group(2)}`",
        summary,
    )
    return re.sub(r"``([^`]+)``", r"`\1`", summary)


def _span(name: str) -> re.Pattern[str]:
    return re.compile(rf"<!-- glance:{name} -->.*?<!-- /glance:{name} -->", re.DOTALL)


def in_page(glance: Glance) -> str:
    """The list as the page has it now."""
    found = _span(glance.name).search(glance.page.read_text())
    assert found is not None, f"{glance.page} has no <!-- glance:{glance.name} --> list"
    return found.group(0)


def regenerate() -> None:
    for glance in GLANCES:
        text = glance.page.read_text()
        glance.page.write_text(text.replace(in_page(glance), render(glance)))


if __name__ == "__main__":
    regenerate()
