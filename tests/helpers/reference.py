"""The API reference's content, as mkdocstrings reads it: the exported names and the
members their entries show, with the docstrings of each.

The site's reference pages (``docs/api/*.md``, built with the rest by ``mkdocs build``)
are rendered at build time by mkdocstrings, which reads the sources with griffe, without
importing them. This module loads the same packages the same way, so that the tests
check the docstrings the site shows: :func:`entries` yields one :class:`Entry` per name
that a documented package exports (its ``__all__``), with the members its entry lists.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import griffe

SRC = Path(__file__).parent.parent.parent / "src"

PACKAGES = (
    "sources",
    "enumerators",
    "readers",
    "sources.spark",
    "sources.spark.prometheus",
    "sources.testing",
    "sources.testing.conformance",
    "sources.testing.plugin",
)
"""The modules whose exported names the reference documents: the author-facing packages,
the Prometheus endpoint (it needs the ``prometheus`` extra, so it is a module of its own)
and the test kit (the conformance suite needs pytest and hypothesis, likewise)."""


@dataclass(frozen=True)
class Doc:
    """One documented object: its path as exported and its docstring."""

    path: str
    obj: griffe.Object

    @property
    def docstring(self) -> str:
        return self.obj.docstring.value if self.obj.docstring else ""

    @property
    def summary(self) -> str:
        return self.docstring.split("\n", 1)[0].strip()

    @property
    def location(self) -> tuple[str, int]:
        """The file and the line (0-based) where the docstring starts."""
        line = self.obj.docstring.lineno if self.obj.docstring else self.obj.lineno
        return str(self.obj.filepath), (line or 1) - 1


@dataclass(frozen=True)
class Entry:
    """The entry of one exported name: its own doc, then those of the members it lists."""

    package: str
    name: str
    doc: Doc
    members: tuple[Doc, ...]

    @property
    def qualified(self) -> str:
        return f"{self.package}.{self.name}"

    @property
    def anchors(self) -> tuple[str, str]:
        """The ids its heading may have on the site: the path it is exported as, or the
        path of the module that defines it when a page documents that module."""
        return self.qualified, self.doc.obj.path

    def docs(self) -> tuple[Doc, ...]:
        return (self.doc, *self.members)


def exported(package: str) -> list[str]:
    """The ``__all__`` of ``package``, as ``from package import *`` reads it, less pytest's
    hooks (the kit's plugin exports ``pytest_configure`` for pytest, not for authors)."""
    names = importlib.import_module(package).__all__
    return sorted((name for name in names if not name.startswith("pytest_")), key=str.lower)


@cache
def modules() -> griffe.ModulesCollection:
    """The documented packages as griffe loads them for mkdocstrings (mkdocs.yml)."""
    loader = griffe.GriffeLoader(search_paths=[str(SRC)], docstring_parser=griffe.Parser.numpy)
    for root in dict.fromkeys(package.split(".")[0] for package in PACKAGES):
        loader.load(root)
    loader.resolve_aliases(implicit=False, external=None)
    return loader.modules_collection


def entries() -> Iterator[Entry]:
    """One entry per exported name of :data:`PACKAGES`."""
    for package in PACKAGES:
        for name in exported(package):
            obj = modules()[f"{package}.{name}"]
            target = obj.final_target if isinstance(obj, griffe.Alias) else obj
            doc = Doc(f"{package}.{name}", target)
            members = tuple(listed_members(package, name, target))
            yield Entry(package, name, doc, members)


def listed_members(package: str, name: str, obj: griffe.Object) -> Iterator[Doc]:
    """The public members of a class, as its entry lists them: those with a docstring
    (``show_if_no_docstring: false``), and those without one, its attributes that
    ``__init__`` sets included.

    A public member without a docstring is right only when it overrides an inherited
    member, whose base documents the contract; other such members are yielded with their
    empty docstring for the tests to catch (the entry would leave them out).
    """
    if not obj.is_class:
        return
    runtime = getattr(importlib.import_module(package), name)
    for member_name, member in obj.members.items():
        if member_name.startswith("_") or member.is_alias:
            continue
        bases = inspect.getmro(runtime)[1:]
        if member.docstring is None and any(hasattr(base, member_name) for base in bases):
            continue  # an override: the base documents it
        yield Doc(f"{package}.{name}.{member_name}", member)
