"""``local_session()``'s Python workers reach Spark over Unix sockets, not TCP: over TCP every
Python task waits about 40 ms for its input (design decision 68); and it keeps 1,000 compiled
classes (design decision 71)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from pyspark.sql import SparkSession

from sources.spark.session import unix_sockets


def socket_families(_: int) -> list[str]:
    """The families of the sockets this Python worker holds, from Linux's ``/proc``."""
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        match = re.fullmatch(r"socket:\[(\d+)\]", target)
        if match:
            inodes.add(match.group(1))
    families = []
    for family in ("unix", "tcp", "tcp6"):
        listed = Path(f"/proc/net/{family}").read_text().split()
        families += [family] * len(inodes.intersection(listed))
    return sorted(set(families))


def test_the_python_workers_of_a_local_session_use_unix_sockets(spark: SparkSession) -> None:
    families = spark.sparkContext.parallelize(range(2), 2).map(socket_families).collect()
    assert families == [["unix"], ["unix"]]


def test_a_socket_directory_too_long_for_a_socket_name_leaves_the_session_on_tcp() -> None:
    assert unix_sockets({"spark.python.unix.domain.socket.dir": "/tmp/" + "d" * 60}) == {}
    assert unix_sockets({"spark.python.unix.domain.socket.dir": "/tmp/short"}) == {
        "spark.python.unix.domain.socket.enabled": "true",
        "spark.python.unix.domain.socket.dir": "/tmp/short",
    }


def test_a_local_session_keeps_1000_compiled_classes(spark: SparkSession) -> None:
    """At Spark's default of 100, a Delta merge's batch compiled its ~107 classes again
    each time (``bench_apply.py --codegen-cache 100`` prints what a merge compiles)."""
    assert spark.conf.get("spark.sql.codegen.cache.maxEntries") == "1000"
