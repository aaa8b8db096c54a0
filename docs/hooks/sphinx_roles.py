"""A griffe extension for the reference: the docstrings' Sphinx roles as links.

The docstrings in ``src`` are written for ``help()`` and editors, with Sphinx's roles
(``:class:`~sources.api.Source```); mkdocstrings renders them as Markdown, where a role
would show as written. Each role becomes the name in code, linked to its entry when the
reference has one: an optional cross-reference, so that a name the reference leaves
out (a private helper, another library's class) stays plain code instead of failing the
strict build. A paragraph that ends in ``::`` ends in ``:``, since the literal block
after it is an indented Markdown code block already.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:attr|class|data|exc|func|meth|mod|obj):`(?P<tilde>~?)(?P<target>[\w.]+)`")
_LITERAL_BLOCK = re.compile(r"(?<=\S)::$", re.MULTILINE)


class SphinxRoles(griffe.Extension):
    """Rewrites every docstring of a loaded package once its tree is complete."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        for obj in objects_in(pkg):
            if obj.docstring is not None:
                obj.docstring.value = markdown_of(obj.docstring.value, obj)


def objects_in(obj: griffe.Object) -> list[griffe.Object]:
    """``obj`` and every object defined in it, at any depth (aliases left to their targets)."""
    found = [obj]
    for member in obj.members.values():
        if not member.is_alias:
            found.extend(objects_in(member))
    return found


def markdown_of(text: str, scope: griffe.Object) -> str:
    """``text`` with its roles as optional cross-references and ``::`` as ``:``."""

    def link(role: re.Match[str]) -> str:
        target = role["target"]
        shown = target.rsplit(".", 1)[-1] if role["tilde"] else target
        identifier = resolved(target, scope)
        return f'<autoref identifier="{identifier}" optional><code>{shown}</code></autoref>'

    return _LITERAL_BLOCK.sub(":", _ROLE.sub(link, text))


def resolved(target: str, scope: griffe.Object) -> str:
    """The full path of ``target`` as written in ``scope``'s docstring: a dotted name
    from a package root is full already; a name relative to the scope (``Source``,
    ``knows_event_time``, ``Source.event_time_hint``) is resolved where it is written."""
    if target.startswith("."):
        module = scope if scope.is_module else scope.module
        return module.path + target
    first, _, rest = target.partition(".")
    if first in scope.modules_collection:
        return target
    try:
        found = scope.resolve(first)
    except griffe.NameResolutionError:
        return target
    return f"{found}.{rest}" if rest else found
