"""A connector package's public names, imported from their modules on first use.

A connector's enumerator and reader import modules of its ``sources`` package (its
splits, its catalog), and its ``Source`` module imports them: a package that imported
its ``Source`` as it loaded would close that circle whenever an executor unpickles a
reader first. So a connector package only names its public names and the module of
each, and Python asks the package's ``__getattr__`` for them (PEP 562).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping


def exported(package: str, modules: Mapping[str, str]) -> Callable[[str], object]:
    """A module ``__getattr__`` for ``package``: each name of ``modules`` taken from its
    module (a submodule of ``package``), any other name an :class:`AttributeError`.

    Examples
    --------
    >>> attribute = exported("sources.numbers.source", {"NumberSequenceSource": "source"})
    >>> attribute("NumberSequenceSource").__name__
    'NumberSequenceSource'
    """

    def attribute(name: str) -> object:
        module = modules.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{module}"), name)

    return attribute
