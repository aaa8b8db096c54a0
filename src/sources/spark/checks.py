"""Early checks of an author's classes against the API they implement.

A method whose parameters do not fit the call splitsource makes (``create_reader(self)``
where ``create_reader(self, schema)`` is called) fails when the source is registered,
with the method named, instead of inside a Spark task minutes later. So does a member
splitsource would never use: a capability's method on a source without the capability's
interface (:mod:`sources.capabilities`), or a setting the ``Source`` had before its
capabilities became interfaces (design decision 63), each named with what to write
instead.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from typing import Any

from enumerators.base import SplitEnumerator
from readers.base import SplitReader
from sources.api import Source
from sources.capabilities import (
    INTERFACES,
    SupportsCountedRecords,
    SupportsRecordIndex,
    SupportsRecordLimits,
)
from sources.errors import SourceDefinitionError
from sources.serialization import SimpleVersionedSerializer
from sources.version import VERSION

__all__ = ["check_overrides", "check_source_class"]

_MADE_BY = {
    "create_enumerator": SplitEnumerator,
    "restore_enumerator": SplitEnumerator,
    "create_reader": SplitReader,
    "split_serializer": SimpleVersionedSerializer,
    "enumerator_state_serializer": SimpleVersionedSerializer,
}
"""The Source's factory methods and the API class of what each returns."""

_TUNING = {
    "default_max_partition_bytes": "max_partition_bytes",
    "default_max_records_per_batch": "max_records_per_batch",
    "read_ahead": "read_ahead",
    "streams_need_state_location": "state_location_required",
}
"""Former settings of the ``Source`` → their field of :class:`~sources.tuning.Tuning`."""

_MARKERS = {
    "positions_count_records": SupportsCountedRecords,
    "records_indexed": SupportsRecordIndex,
}
"""Former flags of the ``Source`` → the interface that replaced each."""


def check_source_class(source_class: type[Source[Any, Any]]) -> None:
    """Check ``source_class``, and the classes its factory methods are annotated to return,
    against the API; raise :class:`SourceDefinitionError` naming the first misfit."""
    check_current_api(source_class)
    check_overrides(source_class, Source)
    for capability in INTERFACES:
        if issubclass(source_class, capability):
            check_overrides(source_class, capability)
    for factory, api in _MADE_BY.items():
        made = _returned_class(getattr(source_class, factory))
        if made is not None and issubclass(made, api) and made is not api:
            check_overrides(made, api)


def check_current_api(source_class: type[Source[Any, Any]]) -> None:
    """Raise :class:`SourceDefinitionError` if ``source_class`` has a member splitsource
    would not use: a former setting of the ``Source``, or a capability's member
    without the capability's interface among its bases."""
    name = source_class.__qualname__
    for old, field in _TUNING.items():
        if hasattr(source_class, old):
            raise SourceDefinitionError(
                f"{name}.{old} is not read by splitsource {VERSION}: set "
                f"tuning = Tuning({field}=...) in the class body instead (from sources.tuning "
                "import Tuning)."
            )
    for old, marker in _MARKERS.items():
        if hasattr(source_class, old):
            raise SourceDefinitionError(
                f"{name}.{old} is not read by splitsource {VERSION}: remove it and add "
                f"{marker.__name__} (from sources.capabilities) to the bases of {name}."
            )
    for capability in INTERFACES:
        if issubclass(source_class, capability):
            continue
        for member in _own_members(capability):
            if hasattr(source_class, member):
                raise SourceDefinitionError(
                    f"{name}.{member} is never called: splitsource calls it only on a "
                    f"{capability.__name__}. Add a {_kind(capability)} (from "
                    f"sources.capabilities) to the bases of {name}, before Source."
                )


def _own_members(capability: type) -> list[str]:
    """The public members ``capability`` declares (inherited ones from ``object`` aside)."""
    return [m for m in vars(capability) if not m.startswith("_")]


def _kind(capability: type) -> str:
    """What to mix in for ``capability``: itself, or one of its kinds."""
    if capability is SupportsRecordLimits:
        return f"{SupportsCountedRecords.__name__} or {SupportsRecordIndex.__name__}"
    return capability.__name__


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
