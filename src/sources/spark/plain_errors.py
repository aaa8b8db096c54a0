"""Our own errors reach Spark users as their message, not under a worker's traceback.

Spark wraps what a Python worker raises in its own error (``PYTHON_DATA_SOURCE_ERROR``,
a failed task, ``STREAM_FAILED``) with the worker's traceback first and the message on
its last line. For a :class:`~sources.errors.SplitSourceError` the message is the whole
story, so the methods Spark calls are wrapped in :func:`shown_plainly`: when such an
error leaves them, the worker is told to send the message alone. PySpark's workers
read ``SPARK_HIDE_TRACEBACK`` when they report an error and exit right after, so the
setting dies with the process that failed; outside a worker (a driver, a test) nothing
is set. A :class:`~sources.errors.ReaderError` that wraps what a split reader raised
unexpectedly (an author's bug, a library's failure) keeps its traceback: there it is
the clue.
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable, Iterator
from typing import Any, TypeVar, cast

from sources.errors import ReaderError, SplitSourceError

__all__ = ["shown_plainly"]

_Method = TypeVar("_Method", bound=Callable[..., Any])


def shown_plainly(method: _Method) -> _Method:
    """``method`` (a function or a generator function), reporting a
    :class:`~sources.errors.SplitSourceError` of its own without the worker's traceback."""
    if inspect.isgeneratorfunction(method):

        @functools.wraps(method)
        def generating(*args: Any, **kwargs: Any) -> Iterator[Any]:
            try:
                yield from method(*args, **kwargs)
            except SplitSourceError as error:
                _hide_traceback_of(error)
                raise

        return cast(_Method, generating)

    @functools.wraps(method)
    def calling(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except SplitSourceError as error:
            _hide_traceback_of(error)
            raise

    return cast(_Method, calling)


def _hide_traceback_of(error: SplitSourceError) -> None:
    in_worker = "PYTHON_WORKER_FACTORY_SECRET" in os.environ  # set by Spark for its workers
    unexpected = isinstance(error, ReaderError) and error.__cause__ is not None
    if in_worker and not unexpected:
        os.environ["SPARK_HIDE_TRACEBACK"] = "1"
