"""Early checks of an author's classes against the API they implement.

A method whose parameters do not fit the call splitsource makes (``create_reader(self)``
where ``create_reader(self, schema)`` is called) fails when the source is registered,
with the method named, instead of inside a Spark task minutes later.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from typing import Any

from enumerators.base import SplitEnumerator
from readers.base import SplitReader
from sources.api import Source
from sources.errors import SourceDefinitionError
from sources.serialization import SimpleVersionedSerializer

__all__ = ["check_overrides", "check_source_class"]

_MADE_BY = {
    "create_enumerator": SplitEnumerator,
    "restore_enumerator": SplitEnumerator,
    "create_reader": SplitReader,
    "split_serializer": SimpleVersionedSerializer,
    "enumerator_state_serializer": SimpleVersionedSerializer,
}
"""The Source's factory methods and the API class of what each returns."""


def check_source_class(source_class: type[Source[Any, Any]]) -> None:
    """Check ``source_class``, and the classes its factory methods are annotated to return,
    against the API; raise :class:`SourceDefinitionError` naming the first misfit."""
    check_overrides(source_class, Source)
    for factory, api in _MADE_BY.items():
        made = _returned_class(getattr(source_class, factory))
        if made is not None and issubclass(made, api) and made is not api:
            check_overrides(made, api)


def check_overrides(cls: type, api: type) -> None:
    """Raise :class:`SourceDefinitionError` if a public method ``cls`` overrides from ``api``
    cannot be called the way splitsource calls ``api``'s."""
    for name in dir(api):
        if name.startswith("_"):
            continue
        expected = inspect.getattr_static(api, name)
        given = inspect.getattr_static(cls, name)
        if given is expected or not _is_method(expected) or not _is_method(given):
            continue
        wanted, actual = _signature(getattr(api, name)), _signature(getattr(cls, name))
        for args, kwargs in _calls(wanted):
            try:
                actual.bind(*args, **kwargs)
            except TypeError:
                raise SourceDefinitionError(
                    f"{cls.__qualname__}.{name}{actual} does not fit the API: splitsource "
                    f"calls it as {api.__name__}.{name}{wanted} declares. Give it those "
                    "parameters."
                ) from None


def _is_method(member: object) -> bool:
    return isinstance(member, classmethod | staticmethod) or inspect.isfunction(member)


def _signature(method: Callable[..., Any]) -> inspect.Signature:
    """The parameters of ``method`` without annotations, which only clutter the message."""
    plain = inspect.signature(method)
    return plain.replace(
        parameters=[p.replace(annotation=p.empty) for p in plain.parameters.values()],
        return_annotation=plain.empty,
    )


def _calls(signature: inspect.Signature) -> list[tuple[list[str], dict[str, str]]]:
    """The calls ``signature`` accepts at both ends: only the required arguments, and every
    positional argument given positionally."""
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    params = list(signature.parameters.values())
    required = [p.name for p in params if p.kind in positional and p.default is p.empty]
    every = [p.name for p in params if p.kind in positional]
    keywords = {
        p.name: p.name
        for p in params
        if p.kind is inspect.Parameter.KEYWORD_ONLY and p.default is p.empty
    }
    return [(required, keywords), (every, keywords)]


def _returned_class(method: Callable[..., Any]) -> type | None:
    """The class ``method`` is annotated to return, if the annotation resolves to one."""
    try:
        returned = typing.get_type_hints(method).get("return")
    except Exception:  # an annotation that names what only a type checker imports
        return None
    returned = typing.get_origin(returned) or returned
    return returned if isinstance(returned, type) else None
