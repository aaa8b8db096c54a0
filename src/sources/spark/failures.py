"""The cause of a failed query, out of whatever Spark wrapped it in.

A splitsource error reaches ``spark.read`` and a plain ``spark.readStream`` with
its message on the first line (:mod:`.plain_errors`). A stream that writes with
``foreachBatch`` is different: Spark runs the batch function through a Python
callback and reports what it raised as ``An exception was raised by the Python
Proxy. Return Message: Traceback (most recent call last): ...``, with the cause
some thirty lines below. splitsource cannot change that wrapping, which happens in
Spark's JVM after the error has left Python; :func:`failure_cause` finds the cause.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["failure_cause"]

_OURS = re.compile(r"\bsources\.errors\.(\w+): (.*)$", re.MULTILINE)
_RAISED = re.compile(
    r"^\s*(?:Caused by: |: )?((?:\w+\.)*\w+(?:Error|Exception|Exit)): (\S.*)$", re.MULTILINE
)
"""A line that names an exception: a Python traceback's last, a JVM trace's ``Caused by``."""
_WRAPPERS = frozenset(
    {
        "PythonException",
        "Py4JJavaError",
        "StreamingQueryException",
        "CapturedException",
        "SparkException",
        "SparkRuntimeException",
        "PySparkException",
    }
)
"""Exceptions that only carry another one: never the cause."""


def failure_cause(failed: Any) -> str | None:
    """The first line of what made ``failed`` fail: ``ErrorType: message``, or ``None``.

    ``failed`` is a streaming query (its ``exception()``, ``None`` while it has not
    failed), an exception (a ``StreamingQueryException``, a ``PythonException``, any
    other) or the text of one. A splitsource error in it is the cause; otherwise the
    last exception of its Python traceback; otherwise its first line. Works with a
    classic and a Spark Connect session.

    Examples
    --------
    >>> text = (
    ...     "[FOREACH_BATCH_USER_FUNCTION_ERROR] An error occurred in the user provided "
    ...     "function in foreach batch sink. Reason: An exception was raised by the Python "
    ...     "Proxy. Return Message: Traceback (most recent call last):\\n"
    ...     '  File "job.py", line 9, in write\\n'
    ...     "pyspark.errors.exceptions.captured.PythonException: \\n"
    ...     "sources.errors.SourceUnavailableError: PostgreSQL at db:5432 cannot be reached: "
    ...     "...\\n"
    ... )
    >>> failure_cause(text)
    'SourceUnavailableError: PostgreSQL at db:5432 cannot be reached: ...'
    >>> failure_cause(
    ...     "[STREAM_FAILED] Query [id = 1] terminated with exception: Failed when Python "
    ...     "streaming data source perform latestOffset: sources.errors.DataLossError: the "
    ...     "slot is gone"
    ... )
    'DataLossError: the slot is gone'
    >>> failure_cause(
    ...     "An exception was raised by the Python Proxy. Return Message: Traceback (most "
    ...     "recent call last):\\npy4j.protocol.Py4JJavaError: An error occurred while "
    ...     "calling o443.count.\\n: org.apache.spark.SparkException: Job aborted\\n"
    ...     "\\tat org.apache.spark.scheduler.DAGScheduler.failJobAndIndependentStages\\n"
    ...     "Caused by: org.apache.kafka.common.errors.TimeoutException: Timeout of 60000ms "
    ...     "expired before the position for partition t-1 could be determined"
    ... ).split(" before")[0]
    'TimeoutException: Timeout of 60000ms expired'
    >>> failure_cause("ValueError: bad value")
    'ValueError: bad value'
    """
    if failed is None:
        return None
    if callable(getattr(failed, "exception", None)):
        return failure_cause(failed.exception())
    text = failed if isinstance(failed, str) else _text_of(failed)
    ours = _OURS.search(text)
    if ours is not None:
        return f"{ours.group(1)}: {ours.group(2).strip()}"
    raised = [
        f"{name.rsplit('.', 1)[-1]}: {message.strip()}"
        for name, message in _RAISED.findall(text)
        if name.rsplit(".", 1)[-1] not in _WRAPPERS
    ]
    if raised:
        return raised[-1]
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else type(failed).__name__


def _text_of(error: BaseException) -> str:
    """``error``'s message with those of its causes, outermost first."""
    parts = []
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        parts.append(f"{type(current).__name__}: {current}")
        current = current.__cause__ or current.__context__
    return "\n".join(parts)
