"""What goes wrong in a read reaches Spark users with the cause on its first line.

Spark wraps what a Python worker raises in its own error (``PYTHON_DATA_SOURCE_ERROR``,
a failed task, ``STREAM_FAILED``) with the worker's traceback first and the message on
its last line. The methods Spark calls are wrapped in :func:`shown_plainly`, which
makes every error leaving them a :class:`~sources.errors.SplitSourceError` whose
message comes first, the same in ``spark.read`` and ``spark.readStream``:

- our own errors pass as they are: their message is the whole story;
- what a connector's code raised unexpectedly (an author's bug, a server that refuses
  connections) becomes a :class:`~sources.errors.ConnectorError` naming the method
  that raised (a :class:`~sources.errors.DiscoveryError` from ``discover_more_splits``,
  as a stream's discovery thread reports it), and a
  :class:`~sources.errors.ReaderError` wrapping a split reader's failure names it too;
  the lines after the first show where in the connector it was raised.

The worker is then told to send the message alone: PySpark's workers read
``SPARK_HIDE_TRACEBACK`` when they report an error and exit right after, so the
setting dies with the process that failed; outside a worker (a driver, a test)
nothing is set.
"""

from __future__ import annotations

import functools
import inspect
import os
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar, cast

from sources.errors import ConnectorError, DiscoveryError, ReaderError, SplitSourceError

__all__ = ["author_frame", "shown_plainly"]

_Method = TypeVar("_Method", bound=Callable[..., Any])

_SRC = Path(__file__).resolve().parent.parent.parent
_FRAMEWORK = tuple(
    str(_SRC / part)
    for part in (
        "sources/spark/",
        "enumerators/runtime/",
        "readers/fetcher.py",
        "sources/api.py",
        "sources/testing/planning.py",
        "sources/testing/reading.py",
    )
)
"""The code that calls a connector's: the first frame below it is the connector's."""
_WHERE = "\n\nRaised in the connector (most recent call last):\n"
_WORKER_MARKS = {"PYTHON_WORKER_FACTORY_SECRET", "PYTHON_UNIX_DOMAIN_ENABLED"}
"""What Spark sets for its Python workers: the first over TCP, the second over Unix sockets."""


def shown_plainly(method: _Method) -> _Method:
    """``method`` (a function or a generator function), raising only a
    :class:`~sources.errors.SplitSourceError` with its cause on the first line."""
    if inspect.isgeneratorfunction(method):

        @functools.wraps(method)
        def generating(*args: Any, **kwargs: Any) -> Iterator[Any]:
            try:
                yield from method(*args, **kwargs)
            except Exception as error:
                plain = _plain(error, args[0] if args else None)
                if plain is error:
                    raise
                raise plain from error

        return cast(_Method, generating)

    @functools.wraps(method)
    def calling(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except Exception as error:
            plain = _plain(error, args[0] if args else None)
            if plain is error:
                raise
            raise plain from error

    return cast(_Method, calling)


def author_frame(tb: TracebackType | None) -> TracebackType | None:
    """The first entry of ``tb`` in a connector's code below the framework's, if any."""
    entered = False
    while tb is not None:
        in_framework = tb.tb_frame.f_code.co_filename.startswith(_FRAMEWORK)
        if entered and not in_framework:
            return tb
        entered = entered or in_framework
        tb = tb.tb_next
    return None


def _plain(error: Exception, owner: Any) -> SplitSourceError:
    if isinstance(error, SplitSourceError):
        plain = error
        cause = error.__cause__
        if isinstance(error, ReaderError) and isinstance(cause, Exception):
            _tell_where(error, cause)
    else:
        plain = _connector_error(error, _format_of(owner))
        _tell_where(plain, error)
    if _WORKER_MARKS.intersection(os.environ):
        os.environ["SPARK_HIDE_TRACEBACK"] = "1"
    return plain


def _connector_error(error: Exception, format_name: str) -> SplitSourceError:
    found = author_frame(error.__traceback__)
    what = f"{type(error).__name__}: {error}"
    if found is None:
        return ConnectorError(f"{format_name} raised {what}")
    method = found.tb_frame.f_code.co_qualname
    if found.tb_frame.f_code.co_name == "discover_more_splits":
        return DiscoveryError(f"Discovering new splits of {format_name} failed: {what}")
    return ConnectorError(f"{method} of {format_name} raised {what}")


def _tell_where(error: SplitSourceError, cause: Exception) -> None:
    """Add to ``error``'s message where in the connector ``cause`` was raised."""
    start = author_frame(cause.__traceback__) or cause.__traceback__
    message = str(error)
    if start is None or _WHERE in message:
        return
    where = "".join(traceback.format_list(traceback.extract_tb(start)))
    error.args = (f"{message}{_WHERE}{where.rstrip()}",)


def _format_of(owner: Any) -> str:
    source = getattr(owner, "source", None) or getattr(owner, "source_class", None)
    format_name = getattr(source, "format_name", None)
    return format_name() if callable(format_name) else "the source"
