"""docs/reference.md, generated from the docstrings of every exported name.

The docstrings in ``src`` are the single source: this module walks the ``__all__`` of
the author-facing packages and renders one entry per name (its signature and
docstring, then those of the class members an author overrides or calls) as text
blocks. ``tests/test_reference.py`` compares the page with :func:`render` and runs
the examples of :func:`entries`. Regenerate the page with::

    PYTHONPATH=src:tests python -m helpers.reference
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

PACKAGES = ("sources", "enumerators", "readers", "sources.testing", "sources.spark")
PAGE = Path(__file__).parent.parent.parent / "docs" / "reference.md"
REGENERATE = "PYTHONPATH=src:tests python -m helpers.reference"

_HEADER = f"""\
# API reference

Every name that the author-facing packages export (their `__all__`), with its
signature and docstring: what it is for, its parameters, what it returns and
raises, and an example. The [connector guide](connector-guide.md) shows how the
pieces fit together; [options.md](options.md) lists the read options. The
examples assume the names of their package imported (`from sources import *`
for an entry under `sources`) and run as doctests.

This page is generated from the docstrings (`{REGENERATE}` in the repository root);
`tests/test_reference.py` fails when it differs from them, when an exported name
has no entry or no summary, and when an example does not run.
"""


@dataclass(frozen=True)
class Doc:
    """One documented thing: a heading, its signature and its docstring."""

    title: str
    signature: str
    docstring: str

    @property
    def summary(self) -> str:
        return self.docstring.split("\n", 1)[0].strip()


@dataclass(frozen=True)
class Entry:
    """The entry of one exported name: its own doc and those of its class members."""

    package: str
    name: str
    doc: Doc
    members: tuple[Doc, ...]

    @property
    def qualified(self) -> str:
        return f"{self.package}.{self.name}"

    def docs(self) -> tuple[Doc, ...]:
        return (self.doc, *self.members)


def exported(package: str) -> list[str]:
    """The ``__all__`` of ``package``, sorted as the page lists them."""
    return sorted(importlib.import_module(package).__all__, key=str.lower)


def entries() -> Iterator[Entry]:
    """One entry per exported name of :data:`PACKAGES`, in page order."""
    for package in PACKAGES:
        module = importlib.import_module(package)
        for name in exported(package):
            yield entry(module, name)


def entry(module: ModuleType, name: str) -> Entry:
    """The entry of ``module.name``: a class, a function or a constant."""
    obj = getattr(module, name)
    title = f"{module.__name__}.{name}"
    if inspect.isclass(obj):
        return Entry(module.__name__, name, class_doc(title, obj), tuple(member_docs(obj)))
    if callable(obj):
        return Entry(module.__name__, name, Doc(title, name + signature(obj), doc_of(obj)), ())
    definition = defining_module(module, name)
    docstring = attribute_docstrings(ast.parse(inspect.getsource(definition))).get(name, "")
    return Entry(module.__name__, name, Doc(title, f"{name} = {obj!r}", docstring), ())


def class_doc(title: str, cls: type) -> Doc:
    """``class Name(bases)``, the constructor's signature if the project defines one, the
    class docstring."""
    bases = [b for b in getattr(cls, "__orig_bases__", cls.__bases__) if b is not object]
    shown = f"({', '.join(plain(base) for base in bases)})" if bases else ""
    lines = [f"class {cls.__name__}{shown}"]
    init = next((c.__dict__["__init__"] for c in cls.__mro__ if "__init__" in c.__dict__), None)
    if init is not None and is_ours(init):
        parameters = list(inspect.signature(init).parameters.values())[1:]
        lines.append(cls.__name__ + str(plain_signature(inspect.Signature(parameters))))
    return Doc(title, "\n".join(lines), doc_of(cls))


def member_docs(cls: type) -> Iterator[Doc]:
    """The public members defined in ``cls``'s own body, in source order.

    A method without a docstring that overrides an inherited one is left out: the
    base class documents its contract.
    """
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls))).body[0]
    assert isinstance(tree, ast.ClassDef)
    attributes = attribute_docstrings(tree)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
            member = cls.__dict__[node.name]
            inherited = any(hasattr(base, node.name) for base in cls.__mro__[1:])
            if inherited and not doc_of(member):
                continue
            title = f"{cls.__name__}.{node.name}"
            yield Doc(title, method_signature(cls, node.name, member), doc_of(member))
        elif (name := assigned_name(node)) and not name.startswith("_"):
            title = f"{cls.__name__}.{name}"
            yield Doc(title, ast.unparse(node), attributes.get(name, ""))


def method_signature(cls: type, name: str, member: Any) -> str:
    """``[abstract] def|classmethod|property name(...)`` as an author overrides or calls it."""
    if isinstance(member, property):
        returned = inspect.signature(member.fget).return_annotation  # type: ignore[arg-type]
        kind, shown = "property", f"{name} -> {plain(returned)}"
    elif isinstance(member, classmethod):
        kind, shown = "classmethod", name + signature(getattr(cls, name))
    elif isinstance(member, staticmethod):
        kind, shown = "staticmethod", name + signature(getattr(cls, name))
    else:
        kind, shown = "def", name + signature(member)
    function = member.fget if isinstance(member, property) else getattr(cls, name)
    abstract = "abstract " if getattr(function, "__isabstractmethod__", False) else ""
    return f"{abstract}{kind} {shown}"


def assigned_name(node: ast.stmt) -> str | None:
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return node.target.id
    if (
        isinstance(node, ast.Assign)
        and len(node.targets) == 1
        and isinstance(node.targets[0], ast.Name)
    ):
        return node.targets[0].id
    return None


def attribute_docstrings(tree: ast.Module | ast.ClassDef) -> dict[str, str]:
    """The docstrings written under assignments in ``tree``'s body, by assigned name."""
    found = {}
    for node, following in zip(tree.body, tree.body[1:], strict=False):
        name = assigned_name(node)
        if (
            name
            and isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)
        ):
            found[name] = inspect.cleandoc(following.value.value)
    return found


def defining_module(package: ModuleType, name: str) -> ModuleType:
    """The module that ``package/__init__.py`` imports ``name`` from."""
    for node in ast.parse(inspect.getsource(package)).body:
        if isinstance(node, ast.ImportFrom) and any(a.name == name for a in node.names):
            return importlib.import_module(node.module or "")
    return package


def doc_of(obj: Any) -> str:
    """``obj``'s own docstring (not one inherited from a base), cleaned."""
    own = obj.__dict__.get("__doc__") if inspect.isclass(obj) else getattr(obj, "__doc__", None)
    return inspect.cleandoc(own) if own else ""


def is_ours(function: Any) -> bool:
    """True for a function of the project (a dataclass's ``__init__`` too), not of Python's."""
    module = getattr(function, "__module__", None) or ""
    return module.split(".")[0] in {"sources", "enumerators", "readers"}


class _Plain:
    """An annotation shown as written: a string annotation without its quotes."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def plain(annotation: Any) -> str:
    """``annotation`` as its source spells it, without module paths or ``~``."""
    if annotation is inspect.Signature.empty:
        return "None"
    if isinstance(annotation, str):
        return annotation
    if inspect.isclass(annotation) and not getattr(annotation, "__args__", None):
        return annotation.__name__
    return re.sub(r"\b(?:[a-z_][\w]*\.)+(?=[A-Za-z_])", "", str(annotation)).replace("~", "")


def plain_signature(sig: inspect.Signature) -> inspect.Signature:
    parameters = [
        p.replace(annotation=_Plain(plain(p.annotation)))
        if p.annotation is not inspect.Parameter.empty
        else p
        for p in sig.parameters.values()
    ]
    returned = (
        sig.return_annotation
        if sig.return_annotation is inspect.Signature.empty
        else _Plain(plain(sig.return_annotation))
    )
    return sig.replace(parameters=parameters, return_annotation=returned)


def signature(function: Any) -> str:
    return str(plain_signature(inspect.signature(function)))


def text_block(doc: Doc) -> str:
    body = doc.signature + ("\n\n" + doc.docstring if doc.docstring else "")
    return f"```text\n{body}\n```\n"


def render() -> str:
    """The whole page, as the docstrings make it now."""
    parts = [_HEADER]
    package = None
    for item in entries():
        if item.package != package:
            package = item.package
            summary = doc_of(importlib.import_module(package)).split("\n", 1)[0]
            parts.append(f"\n## `{package}`\n\n{summary}\n")
        parts.append(f"\n### `{item.qualified}`\n\n{text_block(item.doc)}")
        for member in item.members:
            parts.append(f"\n#### `{member.title}`\n\n{text_block(member)}")
    return "".join(parts)


if __name__ == "__main__":
    PAGE.write_text(render())
    print(f"wrote {PAGE}")
