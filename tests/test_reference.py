"""The API reference's docstrings, which mkdocstrings renders at build time
(``docs/api/*.md``): an entry for every exported name, a summary for it and for each
member its entry lists, and examples that run. That the built pages show them all is
``tests/test_site.py``'s."""

from __future__ import annotations

import doctest
import importlib

import pytest

from helpers.reference import Entry, entries

ENTRIES = {entry.qualified: entry for entry in entries()}
_OPTIONS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def test_every_documented_name_and_member_has_a_summary() -> None:
    """A member without a docstring is left out of its entry, which is right only for one
    that overrides an inherited member: the base documents the contract."""
    missing = [doc.path for entry in ENTRIES.values() for doc in entry.docs() if not doc.summary]
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


@pytest.mark.parametrize("name", sorted(ENTRIES))
def test_the_examples_run(name: str) -> None:
    """Each docstring's examples run as doctests, with the names its package exports in
    scope (as ``from <package> import *`` would bring them)."""
    entry = ENTRIES[name]
    parser, runner = doctest.DocTestParser(), doctest.DocTestRunner(optionflags=_OPTIONS)
    report: list[str] = []
    for doc in entry.docs():
        filename, line = doc.location
        test = parser.get_doctest(doc.docstring, exported_names(entry), doc.path, filename, line)
        runner.run(test, out=report.append)
    assert runner.summarize(verbose=False).failed == 0, "".join(report)


def exported_names(entry: Entry) -> dict[str, object]:
    package = importlib.import_module(entry.package)
    return {name: getattr(package, name) for name in package.__all__}
