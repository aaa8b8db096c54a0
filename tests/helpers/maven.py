"""Jars from Maven Central for tests and benchmarks, fetched once and cached.

Each jar set is described by a small pom in ``tests/helpers/maven/``. Its jars are
copied by ``mvn dependency:copy-dependencies`` into
``~/.cache/splitsource/jars/<pom>-<hash of the pom>/``, so a changed pom fetches
again and an unchanged one costs nothing. Maven's own repository lives in
``~/.cache/splitsource/maven-repo``: deleting ``~/.cache/splitsource`` starts clean.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

__all__ = [
    "CACHE",
    "DELTA_SETTINGS",
    "DELTA_SPARK",
    "MavenError",
    "delta_jars",
    "fetch_jars",
    "kafka_broker_jars",
    "kafka_tools_jars",
    "postgres_jdbc_jars",
    "spark_kafka_jars",
]

POMS = Path(__file__).parent / "maven"
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "splitsource"
_COMPLETE = ".complete"


class MavenError(RuntimeError):
    """Maven is missing or could not fetch a jar set."""


def fetch_jars(pom: Path) -> list[Path]:
    """The jars of ``pom``'s dependencies (transitively), fetched on first use."""
    digest = hashlib.sha256(pom.read_bytes()).hexdigest()[:16]
    target = CACHE / "jars" / f"{pom.stem}-{digest}"
    if not (target / _COMPLETE).exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        # Parallel test workers fetch one at a time: the others then find the jars.
        with (target.parent / f".{target.name}.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not (target / _COMPLETE).exists():
                _copy_dependencies(pom, target)
    return sorted(target.glob("*.jar"))


def kafka_broker_jars() -> list[Path]:
    """Apache Kafka 4.3.1 (the broker, KRaft mode) and its dependencies."""
    return fetch_jars(POMS / "kafka-broker.xml")


def kafka_tools_jars() -> list[Path]:
    """Apache Kafka 4.3.1's command-line tools (``kafka-topics.sh``), without the jars
    :func:`kafka_broker_jars` already has."""
    return fetch_jars(POMS / "kafka-tools.xml")


def postgres_jdbc_jars() -> list[Path]:
    """The PostgreSQL JDBC driver (42.7.14) and its dependencies: ``spark.read.jdbc``'s."""
    return fetch_jars(POMS / "postgresql-jdbc.xml")


def spark_kafka_jars() -> list[Path]:
    """Spark's built-in Kafka source (spark-sql-kafka-0-10 4.2.0) for this pyspark.

    Dependencies that pyspark already ships (Scala, Hadoop, lz4, snappy, ...) are
    left out, so that pyspark's own versions are the only ones on the classpath.
    """
    return _not_shipped(fetch_jars(POMS / "spark-sql-kafka.xml"))


DELTA_SPARK = "4.2"
"""The Spark minor version of the Delta Lake jars (delta-spark_4.2_2.13 4.4.0): Delta
Lake publishes a runtime per Spark version, and none for Spark 4.3 yet."""


DELTA_SETTINGS = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    # A snapshot of a table's log is rebuilt in 50 tasks by default: 1 makes a small
    # table's MERGE about twice as fast here.
    "spark.databricks.delta.snapshotPartitions": "1",
}
"""A test Spark session's settings for Delta Lake, beside :func:`delta_jars`."""


def delta_jars() -> list[Path]:
    """Delta Lake 4.4.0 for Spark 4.2 and the dependencies pyspark does not ship."""
    return _not_shipped(fetch_jars(POMS / "delta-lake.xml"))


def _not_shipped(jars: list[Path]) -> list[Path]:
    """``jars`` but those whose artifact pyspark ships, so its versions are the only ones."""
    import pyspark

    shipped = {_artifact(jar) for jar in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    return [jar for jar in jars if _artifact(jar) not in shipped]


def _artifact(jar: Path) -> str:
    """``kafka-clients`` for ``kafka-clients-3.9.2.jar``."""
    return jar.stem.rsplit("-", 1)[0]


def _copy_dependencies(pom: Path, target: Path) -> None:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise MavenError(
            f"The Kafka tests fetch jars from Maven Central with Maven ('mvn'), which is not "
            f"on PATH. Install it (e.g. apt-get install maven) to fetch {pom.name}."
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    command = [
        mvn,
        "-q",
        "-B",
        "-U",  # retry downloads that failed before instead of trusting the cached failure
        "--no-transfer-progress",
        "-Dstyle.color=never",
        f"-Dmaven.repo.local={CACHE / 'maven-repo'}",
        "-f",
        str(pom),
        "dependency:copy-dependencies",
        f"-DoutputDirectory={staging}",
    ]
    try:
        result = subprocess.run(
            command,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=900,
        )
    except subprocess.TimeoutExpired as error:
        shutil.rmtree(staging, ignore_errors=True)
        raise MavenError(f"Maven did not finish within 900 s: {' '.join(command)}") from error
    if result.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        output = re.sub(r"\x1b\[[0-9;]*m", "", result.stdout + result.stderr)
        tail = "\n".join(output.splitlines()[-30:])
        raise MavenError(
            f"Maven failed (exit {result.returncode}) to fetch the jars of {pom.name}:\n"
            f"  {' '.join(command)}\n{tail}"
        )
    (staging / _COMPLETE).touch()
    try:
        staging.rename(target)
    except OSError:  # another process finished the same fetch first
        shutil.rmtree(staging, ignore_errors=True)
