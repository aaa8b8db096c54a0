"""Shared fixtures: a real local Spark session (loopback only, this interpreter for workers),
a real Kafka broker with topics and a real PostgreSQL server, started only for the tests
that ask for them."""

from __future__ import annotations

import itertools
import os
import re
import sys
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import settings

TESTS = Path(__file__).parent
# Examples run beside Spark jobs on a shared machine: their times say nothing (speed is
# measured in benchmarks/), so hypothesis enforces no deadline.
settings.register_profile("splitsource", deadline=None)
settings.load_profile("splitsource")
os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
os.environ["PYSPARK_PYTHON"] = sys.executable
# Python workers import the test helper sources from here.
os.environ["PYTHONPATH"] = os.pathsep.join(
    filter(None, [str(TESTS), os.environ.get("PYTHONPATH", "")])
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from helpers.jobs import Job
    from helpers.kafka_broker import KafkaBroker
    from helpers.kafka_queries import Stream
    from helpers.postgres import PostgresServer
    from helpers.s3_server import S3Server

_TOPIC_NUMBERS = itertools.count()
_DATABASE_NUMBERS = itertools.count()

# What a test's fixtures start, as the marker that selects it (``./dev quick`` runs none).
_MARKERS_OF_FIXTURES = {
    "spark": "spark",
    "spark_kafka": "spark",
    "spark_jdbc": "spark",
    "kafka_spark": "spark",
    "splitsource_spark": "spark",
    "splitsource_cluster_spark": "cluster",
    "jobs": "spark",
    "kafka_broker": "kafka",
    "pages_broker": "kafka",
    "postgres": "postgres",
    "postgres_database": "postgres",
    "s3": "s3",
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test with what its fixtures start, so that tiers select by marker; then
    put the long tests first, so that parallel workers (``./dev test``) finish together.

    Delta Lake runs on one Spark minor version: its tests are skipped on another, and
    ``./dev test`` runs them in ``.venv-delta``, which has that version."""
    import pyspark

    from helpers.maven import DELTA_SPARK

    on_delta_spark = pyspark.__version__.startswith(f"{DELTA_SPARK}.")
    for item in items:
        if item.get_closest_marker("delta") and not on_delta_spark:
            item.add_marker(
                pytest.mark.skip(
                    reason=f"Delta Lake runs on Spark {DELTA_SPARK}, not pyspark "
                    f"{pyspark.__version__}: ./dev test runs it in .venv-delta"
                )
            )
        for fixture in getattr(item, "fixturenames", ()):
            marker = _MARKERS_OF_FIXTURES.get(fixture)
            if marker is not None:
                item.add_marker(marker)
    items.sort(key=lambda item: not _long(item))


def pytest_collection_finish(session: pytest.Session) -> None:
    """Hand the class archive to Spark's drivers if a selected test starts one (a run of
    ``-m`` deselected tests, such as ``./dev quick``, does not make the archive)."""
    if any(item.get_closest_marker(name) for item in session.items for name in _STARTS_SPARK):
        from sources.testing.class_archive import use_class_archive

        use_class_archive()


_STARTS_SPARK = ("spark", "cluster", "connect", "slow")
"""Markers of tests that start Spark drivers: those runs share a class archive
(:mod:`sources.testing.class_archive`), made once, which cuts each driver's start."""


def _long(item: pytest.Item) -> bool:
    """A test marked slow, or one of a group that a single worker runs through."""
    return any(item.iter_markers("slow")) or worker_group(item.nodeid) != item.nodeid


_WORKER_GROUPS = {
    # A Connect server listens on port 15002: one at a time.
    "tests/test_connect.py::": "connect-port-15002",
    "tests/test_docs.py::test_the_deploying_page_starts_servers": "connect-port-15002",
    # The Kafka pages' broker listens on ports 9092 and 9093, started once for the module.
    "tests/test_docs_kafka.py::": "kafka-port-9092",
    # The module's tests share one standalone cluster.
    "tests/test_standalone.py::": "standalone",
}


def worker_group(nodeid: str) -> str:
    """What one pytest-xdist worker runs together with the test ``nodeid``: its group above,
    else its class (class fixtures, such as the conformance kit's standby driver, start
    once), else the test alone."""
    for prefix, group in _WORKER_GROUPS.items():
        if nodeid.startswith(prefix):
            return group
    path, _, names = nodeid.partition("::")
    if "::" in names:
        return f"{path}::{names.split('::')[0]}"
    return nodeid


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Parallel runs (``./dev test``) hand each worker whole groups (:func:`worker_group`).

    pytest-xdist's own ``--dist loadgroup`` cannot be used: it renames tests through an
    attribute that pytest 9.2 no longer reads, so its groups are split across workers.
    """
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return worker_group(nodeid)

    return GroupScheduling(config, log)


@pytest.fixture(scope="session")
def spark(request: pytest.FixtureRequest) -> Iterator[SparkSession]:
    """One local[2] session for the whole run, with the packaged sources registered.

    Spark takes jars only when a session starts, and a process has one session: when
    any collected test uses ``spark_kafka``, this session starts with Spark's Kafka
    source jars (fetched by Maven on first use). Other runs stay free of Maven; the
    jars themselves add no measurable start-up time (about 10 s either way here).
    """
    from sources.numbers.source import NumberSequenceSource
    from sources.spark import local_session, register
    from sources.testing.stream_job import QUICK_JVM

    conf = dict(QUICK_JVM)  # tests run many small queries: a fifth less CPU time in all
    jars: list[Path] = []
    if any("spark_kafka" in item.fixturenames for item in request.session.items):
        from helpers.maven import spark_kafka_jars

        jars += spark_kafka_jars()
    if any("spark_jdbc" in item.fixturenames for item in request.session.items):
        from helpers.maven import postgres_jdbc_jars

        jars += postgres_jdbc_jars()
    if any(item.get_closest_marker("delta") for item in request.session.items):
        from helpers.maven import DELTA_SETTINGS, delta_jars

        jars += delta_jars()
        conf.update(DELTA_SETTINGS)
    if jars:
        conf["spark.jars"] = ",".join(str(jar) for jar in jars)
    session = local_session("local[2]", "splitsource-tests", conf)
    register(session, NumberSequenceSource)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def spark_kafka(spark: SparkSession) -> SparkSession:
    """The ``spark`` session, in which Spark's built-in ``format("kafka")`` works."""
    if "spark-sql-kafka" not in spark.conf.get("spark.jars", ""):
        pytest.fail(
            "The Spark session started without Spark's Kafka jars: request the spark_kafka "
            "fixture as a test argument (not through getfixturevalue) so that it is seen "
            "at collection."
        )
    return spark


@pytest.fixture(scope="session")
def spark_jdbc(spark: SparkSession) -> SparkSession:
    """The ``spark`` session, with the PostgreSQL JDBC driver for ``spark.read.jdbc``."""
    if "postgresql-42" not in spark.conf.get("spark.jars", ""):
        pytest.fail(
            "The Spark session started without the PostgreSQL JDBC driver: request the "
            "spark_jdbc fixture as a test argument (not through getfixturevalue) so that it "
            "is seen at collection."
        )
    return spark


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    """A real Kafka broker for the whole run, started when a test first asks for it.

    A test that stops or kills it must start it again (``restart()``) before it ends.
    """
    from helpers.kafka_broker import KafkaBroker

    broker = KafkaBroker(tmp_path_factory.mktemp("kafka"))
    broker.start()
    yield broker
    broker.stop()


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """A real PostgreSQL server on 127.0.0.1 for the whole run (``wal_level=logical``), started
    when a test first asks for it; stopped (``pg_ctl stop -m fast``) and removed at the end.

    A test that stops or kills it must start it again (``start()``) before it ends.
    """
    from helpers.postgres import PostgresServer

    server = PostgresServer()
    try:
        server.start()
        yield server
    finally:
        server.remove()


@pytest.fixture
def postgres_database(postgres: PostgresServer, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh database owned by the test user, for one test; dropped at the end with the
    replication slots made in it."""
    name = f"t{next(_DATABASE_NUMBERS)}_" + re.sub(r"[^a-z0-9_]+", "_", request.node.name.lower())
    name = postgres.create_database(name[:63])
    yield name
    with postgres.admin() as admin:
        admin.execute(
            "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
            "WHERE database = %s",
            (name,),
        )
        admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


@pytest.fixture
def topic(kafka_broker: KafkaBroker, request: pytest.FixtureRequest) -> Callable[..., str]:
    """Make a topic with a name unique to this run: ``topic(partitions=1, config=None,
    create=True)`` returns its name, named after the test."""
    stem = re.sub(r"[^a-zA-Z0-9._-]+", "-", request.node.name)[:150]

    def make(
        partitions: int = 1, config: Mapping[str, str] | None = None, create: bool = True
    ) -> str:
        name = f"{stem}-{next(_TOPIC_NUMBERS)}"
        if create:
            kafka_broker.create_topic(name, partitions, config)
        return name

    return make


@pytest.fixture(scope="session")
def kafka_spark(spark: SparkSession) -> SparkSession:
    """The test session with splitsource.kafka registered."""
    from sources.kafka.source import KafkaSource
    from sources.spark import register

    register(spark, KafkaSource)
    return spark


@pytest.fixture
def stream(
    kafka_spark: SparkSession, kafka_broker: KafkaBroker, tmp_path: Path
) -> Iterator[Callable[..., Stream]]:
    """Makes :class:`helpers.kafka_queries.Stream` s; stops their queries at the end."""
    from helpers.kafka_queries import Stream

    made: list[Stream] = []

    def make(**options: str) -> Stream:
        made.append(Stream(kafka_spark, kafka_broker, tmp_path / f"s{len(made)}", **options))
        return made[-1]

    yield make
    for query in kafka_spark.streams.active:
        query.stop()


@pytest.fixture
def jobs() -> Iterator[list[Job]]:
    """Jobs started by a test; whatever still runs at the end is killed."""
    started: list[Job] = []
    yield started
    for job in started:
        if job.running():
            job.kill()


@pytest.fixture(scope="session")
def s3() -> Iterator[S3Server]:
    """A real S3 endpoint (moto's server) on 127.0.0.1 for the whole run, started when a
    test first asks for it."""
    from helpers.s3_server import S3Server

    with S3Server() as server:
        yield server


@pytest.fixture
def bucket(s3: S3Server) -> str:
    """A fresh bucket on the ``s3`` endpoint, for one test."""
    name = f"t-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(name)
    return name
