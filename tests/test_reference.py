"""docs/reference.md: an entry for every exported name, as its docstrings make it, whose
examples run (the generator is ``tests/helpers/reference.py``)."""

from __future__ import annotations

import doctest
import importlib
import re

import pytest

from helpers.reference import PACKAGES, PAGE, REGENERATE, Entry, entries, exported, render

ENTRIES = {entry.qualified: entry for entry in entries()}
_OPTIONS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
_FIX = f"run in the repository root: {REGENERATE}"


def test_every_exported_name_has_an_entry_on_the_page() -> None:
    headings = set(re.findall(r"^### `([\w.]+)`$", PAGE.read_text(), re.MULTILINE))
    names = {f"{package}.{name}" for package in PACKAGES for name in exported(package)}
    assert sorted(names - headings) == [], f"no entry on {PAGE.name}; {_FIX}"
    assert sorted(headings - names) == [], f"entries of names not exported; {_FIX}"


def test_every_documented_name_and_member_has_a_summary() -> None:
    missing = [
        f"{name}: {doc.title}"
        for name, entry in ENTRIES.items()
        for doc in entry.docs()
        if not doc.summary
    ]
    assert missing == [], "these have no docstring summary"


def test_every_name_but_the_specific_errors_has_an_example() -> None:
    """The errors share the example of ``SplitSourceError``."""
    without = [
        name
        for name, entry in ENTRIES.items()
        if not entry.name.endswith("Error") or entry.name == "SplitSourceError"
        if not any(">>>" in doc.docstring for doc in entry.docs())
    ]
    assert without == []


def test_the_page_is_what_the_docstrings_generate() -> None:
    assert PAGE.read_text() == render(), f"{PAGE.name} differs from the docstrings; {_FIX}"


@pytest.mark.parametrize("name", sorted(ENTRIES))
def test_the_examples_run(name: str) -> None:
    """Each docstring's examples run as doctests, with the names its package exports in
    scope (as ``from <package> import *`` would bring them)."""
    entry, page = ENTRIES[name], PAGE.read_text()
    parser, runner = doctest.DocTestParser(), doctest.DocTestRunner(optionflags=_OPTIONS)
    report: list[str] = []
    for doc in entry.docs():
        line = page[: page.find(doc.docstring)].count("\n")
        test = parser.get_doctest(doc.docstring, exported_names(entry), doc.title, str(PAGE), line)
        runner.run(test, out=report.append)
    assert runner.summarize(verbose=False).failed == 0, "".join(report)


def exported_names(entry: Entry) -> dict[str, object]:
    package = importlib.import_module(entry.package)
    return {name: getattr(package, name) for name in package.__all__}
