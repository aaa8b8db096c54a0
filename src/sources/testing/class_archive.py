"""A class-data archive for the Spark drivers of a test run: each starts on less CPU.

A Spark driver loads some ten thousand classes from Spark's jars at every start.
The JDK can map them from one archive file instead (class-data sharing, a dynamic
archive written by a JVM at exit). :func:`use_class_archive` makes that archive
once per Spark and Java installation, in the cache directory, and hands it with
the quick JIT and GC options to every driver started afterwards by this process
or its children, through ``SPARK_SUBMIT_OPTS``; a test run that starts many
drivers (kill-and-restart cases, clusters, Connect servers) spends far less
time starting them.

``python -m sources.testing.class_archive`` makes the archive if it is missing
(``./dev test`` runs it while ruff and mypy run). Run with a directory under a JVM
option that writes the archive, it is the workload whose classes go in.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pyspark.find_spark_home import _find_spark_home

from sources.spark import local_session

__all__ = ["QUICK_JVM_OPTIONS", "class_archive", "quick_jvm_options", "use_class_archive"]

QUICK_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
"""C1 only and a serial GC: a short-lived driver starts on about a third less CPU."""
_STALE_AFTER = 7 * 24 * 3600.0
"""Archives of other installations older than this are removed from the cache."""
_CREATE_TIMEOUT = 600.0


def quick_jvm_options(cache_dir: Path | None = None) -> str:
    """The quick options and the archive, for a Spark JVM; the archive is made if missing.

    Without a usable archive (no ``java`` found, or its creation failed) the quick
    options alone.
    """
    archive = class_archive(cache_dir)
    return QUICK_JVM_OPTIONS + (f" -XX:SharedArchiveFile={archive}" if archive else "")


def use_class_archive(cache_dir: Path | None = None) -> str:
    """Make every Spark driver started from now on, and its executors, use
    :func:`quick_jvm_options`: adds them to ``SPARK_SUBMIT_OPTS``, which children
    inherit. Returns what was added."""
    jvm = quick_jvm_options(cache_dir)
    # A driver turns spark.* system properties into its conf: its executors get them too.
    options = f'{jvm} "-Dspark.executor.extraJavaOptions={jvm}"'
    current = os.environ.get("SPARK_SUBMIT_OPTS", "")
    if options not in current:
        os.environ["SPARK_SUBMIT_OPTS"] = f"{current} {options}".strip()
    return options


def class_archive(cache_dir: Path | None = None) -> Path | None:
    """The archive for this Spark and Java, made now if missing (one process at a time)."""
    key = _installation_key()
    if key is None:
        return None
    directory = cache_dir or _default_cache_dir()
    directory.mkdir(parents=True, exist_ok=True)
    archive = directory / f"spark-{key}.jsa"
    with (directory / f".spark-{key}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not archive.exists():
            _remove_stale(directory, keep=archive)
            _create(archive)
    return archive if archive.exists() else None


def _default_cache_dir() -> Path:
    given = os.environ.get("SPLITSOURCE_CACHE_DIR")
    if given:
        return Path(given)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "splitsource"


def _installation_key() -> str | None:
    """What the JVM checks an archive against: the java binary and every jar on the path."""
    java_home = os.environ.get("JAVA_HOME")
    java = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
    if java is None or not Path(java).exists():
        return None
    digest = hashlib.sha256(QUICK_JVM_OPTIONS.encode())
    java_binary = Path(java).resolve()
    digest.update(f"{java_binary}:{java_binary.stat().st_mtime_ns}".encode())
    for jar in sorted((Path(_find_spark_home()) / "jars").glob("*.jar")):
        facts = jar.stat()
        digest.update(f"{jar}:{facts.st_size}:{facts.st_mtime_ns}".encode())
    return digest.hexdigest()[:16]


def _remove_stale(directory: Path, keep: Path) -> None:
    for old in directory.glob("spark-*.jsa"):
        if old != keep and time.time() - old.stat().st_mtime > _STALE_AFTER:
            old.unlink(missing_ok=True)


def _create(archive: Path) -> None:
    """Run the workload in a driver that writes its classes to ``archive`` as it exits."""
    with tempfile.TemporaryDirectory(prefix="class-archive-", dir=archive.parent) as work:
        written = Path(work) / archive.name
        env = dict(
            os.environ,
            SPARK_SUBMIT_OPTS=f"{QUICK_JVM_OPTIONS} -XX:ArchiveClassesAtExit={written}",
        )
        started = time.monotonic()
        result = subprocess.run(
            [sys.executable, "-m", "sources.testing.class_archive", work],
            env=env,
            capture_output=True,
            text=True,
            timeout=_CREATE_TIMEOUT,
            check=False,
        )
        if result.returncode != 0 or not written.exists():
            print(
                f"splitsource: no class archive for Spark's JVMs (drivers start without "
                f"one, on more CPU); the workload ended with {result.returncode}:\n"
                f"{result.stderr[-2000:]}",
                file=sys.stderr,
            )
            return
        os.replace(written, archive)
        print(
            f"splitsource: wrote {archive} in {time.monotonic() - started:.0f}s",
            file=sys.stderr,
        )


def _workload(work: Path) -> None:
    """Load what test drivers load: batch and stream reads, file sinks, checkpoints."""
    spark = local_session("local[2]", "splitsource-class-archive")
    numbers = spark.read.format("splitsource.numbers").option("to", 999).load()
    numbers.selectExpr("value % 7 AS key", "value").groupBy("key").count().collect()
    numbers.write.mode("overwrite").option("header", "true").csv(str(work / "csv"))
    spark.read.option("header", "true").csv(str(work / "csv")).collect()
    stream = spark.readStream.format("splitsource.numbers").option("to", 999).load()
    query = (
        stream.writeStream.format("parquet")
        .option("path", str(work / "sink"))
        .option("checkpointLocation", str(work / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    spark.read.parquet(str(work / "sink")).count()
    spark.stop()


if __name__ == "__main__":
    if len(sys.argv) > 1:
        _workload(Path(sys.argv[1]))
    else:
        class_archive()
