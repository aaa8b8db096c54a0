"""Spark session set-up that splitsource needs: version check, Python workers, loopback.

Classic and Spark Connect sessions alike; only a classic session lets a client
choose its Python workers after it started.
"""

from __future__ import annotations

import os
import sys
import tempfile
import uuid
from collections.abc import Mapping

from pyspark.sql import SparkSession

from sources.errors import UnsupportedSparkVersionError

__all__ = ["MIN_SPARK_VERSION", "check_spark_version", "local_session", "use_this_python"]

MIN_SPARK_VERSION = (4, 2)


def check_spark_version(version: str) -> None:
    """Raise :class:`UnsupportedSparkVersionError` if ``version`` is older than 4.2."""
    try:
        major, minor = (int(part) for part in version.split(".")[:2])
    except ValueError:
        raise UnsupportedSparkVersionError(
            f"Cannot tell the Spark version from '{version}'; splitsource needs Spark >= 4.2."
        ) from None
    if (major, minor) < MIN_SPARK_VERSION:
        raise UnsupportedSparkVersionError(
            f"splitsource needs Spark >= 4.2 (admission control and AvailableNow for Python "
            f"data sources arrived there), but this session runs Spark {version}. "
            "Upgrade with: pip install 'pyspark>=4.2'."
        )


def use_this_python(spark: SparkSession) -> None:
    """Run a classic session's Python workers with this interpreter unless the user chose one.

    Python data sources are pickled with the interpreter Spark names for its
    workers; if that one lacks splitsource, every read fails at import. When
    neither ``PYSPARK_PYTHON`` nor ``spark.pyspark.python`` is set, the
    interpreter running the driver is the one that has splitsource. A Spark
    Connect server runs the ``PYSPARK_PYTHON`` of its own environment, which
    a client cannot change: this does nothing there.
    """
    if not isinstance(spark, SparkSession):
        return  # a Spark Connect session
    context = spark.sparkContext
    if os.environ.get("PYSPARK_PYTHON") or context.getConf().get("spark.pyspark.python"):
        return
    context.pythonExec = sys.executable


def local_session(
    master: str = "local[2]",
    app_name: str = "splitsource",
    conf: Mapping[str, str] | None = None,
    *,
    connect: bool = False,
) -> SparkSession:
    """A Spark session for demos, tests and benchmarks: loopback only, this Python for workers,
    filter pushdown into Python data sources on, Python workers reached over Unix sockets,
    1,000 compiled classes of generated code kept.

    Over Spark's default TCP sockets, every task of a Python data source waits about
    40 ms for its input (Nagle's algorithm against delayed acknowledgements); Unix
    sockets (``spark.python.unix.domain.socket.enabled``) have no such wait. Their
    files go to this process's temporary directory (``spark.python.unix.domain.socket.dir``)
    unless ``conf`` names another; where that path is too long for a socket's name,
    the session stays on TCP.

    Spark keeps 100 classes of the code it generates by default
    (``spark.sql.codegen.cache.maxEntries``): too few for a stream whose batches run
    the same plans, such as one that merges into Delta Lake with ``apply_changes``
    (about 107 classes a batch), which then compiles them all again each batch.

    With ``connect=True``, a Spark Connect session served by a local Connect
    server that this process starts on 127.0.0.1, port 15002 (needs pyspark's
    ``connect`` extra, ``pip install 'splitsource[connect]'``). Either kind is
    one per process: a second call returns the running session. ``conf`` is added
    to the builder last, so it overrides the settings above.

    Examples
    --------
    Skipped here (it starts Spark); section 7 of the connector guide runs it:

    >>> spark = local_session(conf={"spark.sql.shuffle.partitions": "2"})  # doctest: +SKIP
    >>> spark.conf.get("spark.sql.python.filterPushdown.enabled")  # doctest: +SKIP
    'true'
    """
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # A Connect server reads its workers' Python from its environment only.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.remote(master) if connect else SparkSession.builder.master(master)
    )
    builder = (
        builder.appName(app_name)
        .config("spark.connect.grpc.binding.address", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.pyspark.python", os.environ["PYSPARK_PYTHON"])
        .config("spark.log.level", "WARN")
        .config("spark.sql.python.filterPushdown.enabled", "true")
        .config("spark.sql.codegen.cache.maxEntries", "1000")
    )
    for key, value in unix_sockets(conf or {}).items():
        builder = builder.config(key, value)
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


SOCKET_NAME_ROOM = 100
"""The longest socket path Linux and macOS both take (108 and 104 bytes), less a margin."""


def unix_sockets(conf: Mapping[str, str]) -> dict[str, str]:
    """The settings that put Spark's Python workers on Unix sockets, in a directory short
    enough for the sockets' names (Spark names them ``.<uuid>.sock``, 42 characters);
    none if that directory is too long."""
    directory = conf.get("spark.python.unix.domain.socket.dir") or tempfile.gettempdir()
    if len(os.path.join(directory, f".{uuid.uuid4()}.sock")) > SOCKET_NAME_ROOM:
        return {}
    return {
        "spark.python.unix.domain.socket.enabled": "true",
        "spark.python.unix.domain.socket.dir": directory,
    }
