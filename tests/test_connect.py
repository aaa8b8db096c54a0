"""Every entry point over Spark Connect: ``register``, bounded reads, AvailableNow and Kafka
streams, ``stop_gracefully`` and ``cancel``, errors.

One Connect server, started by ``local_session(connect=True)``
(:class:`helpers.connect_server.ConnectServer`), serves the module; each test drives it from
a client script in its own process.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from helpers.connect_server import PORT, ConnectServer

if TYPE_CHECKING:
    from helpers.kafka_broker import KafkaBroker
    from helpers.postgres import PostgresServer

pytestmark = pytest.mark.connect


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectServer]:
    with ConnectServer(tmp_path_factory.mktemp("connect")) as started:
        yield started


def test_the_local_server_listens_on_loopback_only(server: ConnectServer) -> None:
    listening = {
        address
        for table in ("/proc/net/tcp", "/proc/net/tcp6")
        for address, state in listening_sockets(Path(table))
        if address.endswith(f":{PORT:04X}") and state == "0A"
    }
    assert listening
    assert all(
        address.split(":")[0] in ("0100007F", "0000000000000000FFFF00000100007F")
        for address in listening
    )


def listening_sockets(table: Path) -> list[tuple[str, str]]:
    """(local address, state) of each socket in a /proc/net/tcp table."""
    rows = table.read_text().splitlines()[1:]
    return [(row.split()[1], row.split()[3]) for row in rows]


def write_parquet(directory: Path, first_file: int, files: int, rows: int = 100) -> None:
    directory.mkdir(exist_ok=True)
    for number in range(first_file, first_file + files):
        ids = pa.array(range(number * rows, (number + 1) * rows), pa.int64())
        pq.write_table(pa.table({"id": ids}), directory / f"part-{number:03}.parquet")


def test_the_packaged_formats_need_no_register_call(server: ConnectServer) -> None:
    """The server's Python has splitsource, so its ``pyspark_*`` modules register the
    packaged formats; the client imports nothing of splitsource. Runs before any test of the
    module registers a source in the client's session."""
    result = server.run(
        """
        numbers = spark.read.format("splitsource.numbers").option("to", 999).load()
        report(sum=numbers.selectExpr("sum(value)").first()[0])
        """
    )
    assert result == {"sum": 999 * 1000 // 2}


def test_a_bounded_read_of_numbers(server: ConnectServer) -> None:
    result = server.run(
        """
        from pyspark.sql import functions as F
        from sources.numbers.source import NumberSequenceSource
        from sources.spark import register

        register(spark, NumberSequenceSource)
        df = (spark.read.format("splitsource.numbers").option("from", 1).option("to", 100_000)
              .option("splits", 8).option("numPartitions", 3).load())
        rows = df.groupBy(F.spark_partition_id()).agg(F.count("*"), F.sum("value")).collect()
        report(count=sum(row[1] for row in rows), sum=sum(row[2] for row in rows),
               partitions=len(rows))
        """
    )
    assert result == {"count": 100_000, "sum": 5_000_050_000, "partitions": 3}


def test_a_bounded_read_of_files_spreads_over_the_servers_cores(
    server: ConnectServer, tmp_path: Path
) -> None:
    """Four small files on the server's local[2]: two partitions, as on a classic session."""
    write_parquet(tmp_path / "data", 0, 4)
    result = server.run(
        """
        from pyspark.sql.functions import spark_partition_id
        from sources.files.source import FileSource
        from sources.spark import register

        register(spark, FileSource)
        df = (spark.read.format("splitsource.files").option("format", "parquet")
              .schema("id bigint").load(args[0]))
        rows = df.select("id", spark_partition_id().alias("partition")).collect()
        report(ids=sorted(row.id for row in rows),
               partitions=len({row.partition for row in rows}))
        """,
        str(tmp_path / "data"),
    )
    assert result == {"ids": list(range(400)), "partitions": 2}


AVAILABLE_NOW = """
from sources.files.source import FileSource
from sources.spark import register

register(spark, FileSource)
source, out = args[0], args[1]
query = (spark.readStream.format("splitsource.files").option("format", "parquet")
         .option("maxFilesPerTrigger", 1).option("stateLocation", out + "/state")
         .schema("id bigint").load(source)
         .writeStream.format("parquet").option("path", out + "/sink")
         .option("checkpointLocation", out + "/checkpoint")
         .trigger(availableNow=True).start())
query.awaitTermination(120)
report(batches=[progress.numInputRows for progress in query.recentProgress],
       ids=[row.id for row in spark.read.parquet(out + "/sink").collect()])
"""


def test_an_available_now_stream_restarts_exactly_once(
    server: ConnectServer, tmp_path: Path
) -> None:
    data, out = tmp_path / "data", str(tmp_path / "out")
    write_parquet(data, 0, 2)
    first = server.run(AVAILABLE_NOW, str(data), out)
    write_parquet(data, 2, 1)
    second = server.run(AVAILABLE_NOW, str(data), out)

    assert first["batches"] == [100, 100]  # admission control: one file per trigger
    assert second["batches"] == [100]
    assert sorted(second["ids"]) == list(range(300))


@pytest.mark.kafka
def test_a_kafka_stream_cancelled_and_restarted_reads_each_record_once(
    server: ConnectServer,
    kafka_broker: KafkaBroker,
    topic: Callable[..., str],
    tmp_path: Path,
) -> None:
    name = topic(partitions=2)
    kafka_broker.produce(name, [str(n) for n in range(600)])
    result = server.run(
        """
        import time
        from sources.kafka.source import KafkaSource
        from sources.spark import cancel, register

        register(spark, KafkaSource)
        bootstrap, name, out = args[0], args[1], args[2]

        def start(**trigger):
            return (spark.readStream.format("splitsource.kafka")
                    .option("kafka.bootstrap.servers", bootstrap).option("subscribe", name)
                    .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", 200)
                    .load().selectExpr("CAST(CAST(value AS STRING) AS BIGINT) AS n")
                    .writeStream.format("parquet").option("path", out + "/sink")
                    .option("checkpointLocation", out + "/checkpoint").trigger(**trigger).start())

        query = start(processingTime="1 second")
        while not any(progress.numInputRows for progress in query.recentProgress):
            time.sleep(0.2)
        cancel(query)
        before_restart = spark.read.parquet(out + "/sink").count()
        start(availableNow=True).awaitTermination(120)
        report(before_restart=before_restart,
               values=[row.n for row in spark.read.parquet(out + "/sink").collect()])
        """,
        kafka_broker.bootstrap,
        name,
        str(tmp_path / "out"),
    )
    assert 0 < result["before_restart"] < 600
    assert sorted(result["values"]) == list(range(600))


@pytest.mark.kafka
def test_the_hybrid_stream_reads_the_archive_then_kafka_once_over_connect(
    server: ConnectServer,
    kafka_broker: KafkaBroker,
    topic: Callable[..., str],
    tmp_path: Path,
) -> None:
    """String options only, from the client: archive files, the switch, Kafka, a restart."""
    from helpers.archives import archive_in_files

    name = topic(partitions=2)
    kafka_broker.produce(name, [str(n) for n in range(400)])
    assert archive_in_files(kafka_broker, name, tmp_path / "archive", 3) == 400
    kafka_broker.produce(name, [str(n) for n in range(400, 700)])
    script = """
        from sources.hybrid.archive_then_kafka import ArchiveThenKafkaSource
        from sources.spark import register

        register(spark, ArchiveThenKafkaSource)
        bootstrap, name, archive, out = args

        def run():
            query = (spark.readStream.format("splitsource.hybrid")
                     .option("archive.format", "parquet").option("archive.path", archive)
                     .option("live.kafka.bootstrap.servers", bootstrap)
                     .option("live.subscribe", name).option("maxFilesPerTrigger", 1)
                     .option("maxOffsetsPerTrigger", 100).option("stateLocation", out + "/state")
                     .load().selectExpr("CAST(value AS BIGINT) AS n")
                     .writeStream.format("parquet").option("path", out + "/sink")
                     .option("checkpointLocation", out + "/checkpoint")
                     .trigger(availableNow=True).start())
            query.awaitTermination(180)
            return [progress.numInputRows for progress in query.recentProgress]

        batches = run()
        values = [row.n for row in spark.read.parquet(out + "/sink").collect()]
        report(batches=batches, values=values)
        """
    args = (kafka_broker.bootstrap, name, str(tmp_path / "archive"), str(tmp_path / "out"))
    first = server.run(script, *args)
    assert sorted(first["values"]) == list(range(700))
    assert max(first["batches"]) <= 134 and len(first["batches"]) >= 3 + 3
    kafka_broker.produce(name, [str(n) for n in range(700, 750)])
    second = server.run(script, *args)
    assert sorted(second["values"]) == list(range(750))


def test_stop_gracefully_leaves_nothing_to_replay(server: ConnectServer, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = server.run(
        """
        import time
        from sources.rate.source import RateSource
        from sources.spark import register, stop_gracefully

        register(spark, RateSource)
        state, out = args[0], args[1]
        query = (spark.readStream.format("splitsource.rate").option("rowsPerSecond", 1000)
                 .option("maxRecordsPerTrigger", 500).option("stateLocation", state).load()
                 .writeStream.format("parquet").option("path", out + "/sink")
                 .option("checkpointLocation", out + "/checkpoint")
                 .trigger(processingTime="500 milliseconds").start())
        while not any(progress.numInputRows for progress in query.recentProgress):
            time.sleep(0.2)
        stop_gracefully(query, state, timeout=120)
        report(active=query.isActive, rows=spark.read.parquet(out + "/sink").count())
        """,
        str(tmp_path / "state"),
        str(out),
    )
    assert result["active"] is False
    assert result["rows"] > 0
    checkpoint = out / "checkpoint"
    logged = {p.name for p in (checkpoint / "offsets").iterdir() if p.name.isdigit()}
    committed = {p.name for p in (checkpoint / "commits").iterdir() if p.name.isdigit()}
    assert logged == committed


def test_a_bad_option_names_the_option_on_the_client(server: ConnectServer) -> None:
    """Over Connect, ``load()`` only builds a plan: the error comes with the first action."""
    result = server.run(
        """
        from sources.numbers.source import NumberSequenceSource
        from sources.spark import register

        register(spark, NumberSequenceSource)
        df = None
        try:
            df = spark.read.format("splitsource.numbers").option("splits", 0).load()
            df.count()
        except Exception as error:
            report(at="load" if df is None else "action", kind=type(error).__name__,
                   message=str(error))
        """
    )
    assert (result["at"], result["kind"]) == ("action", "AnalysisException")
    first_line = result["message"].splitlines()[0]
    assert "Option 'splits' of splitsource.numbers: must be at least 1, got 0" in first_line
    assert "Valid options for splitsource.numbers" in result["message"]
    assert "Traceback" not in result["message"]


def test_a_listener_gets_the_source_metrics_over_connect(
    server: ConnectServer, tmp_path: Path
) -> None:
    write_parquet(tmp_path / "data", 0, 3)
    result = server.run(
        """
        import time
        from sources.spark import SourceMetricsListener, source_metrics

        listener = SourceMetricsListener()
        spark.streams.addListener(listener)
        source, out = args[0], args[1]
        query = (spark.readStream.format("splitsource.files").option("format", "parquet")
                 .option("maxFilesPerTrigger", 1).option("stateLocation", out + "/state")
                 .schema("id bigint").load(source)
                 .writeStream.format("noop").option("checkpointLocation", out + "/checkpoint")
                 .trigger(availableNow=True).start())
        query.awaitTermination(120)
        deadline = time.monotonic() + 60
        while listener.latest().get(str(query.id), {}).get("batchId") != 2:
            assert time.monotonic() < deadline, listener.latest()
            time.sleep(0.2)
        progress = [p for p in query.recentProgress if p.numInputRows]
        report(pending=[source_metrics(p)["splitsource.files"]["pendingFiles"] for p in progress],
               kept=listener.latest()[str(query.id)]["sources"]["splitsource.files"])
        """,
        str(tmp_path / "data"),
        str(tmp_path / "out"),
    )
    assert result["pending"] == [2, 1, 0]
    assert result["kept"]["pendingFiles"] == 0
    assert result["kept"]["activeSplits"] == 1


@pytest.mark.postgres
def test_postgres_snapshot_and_changes_over_connect_with_no_register_call(
    server: ConnectServer, postgres: PostgresServer, postgres_database: str, tmp_path: Path
) -> None:
    """Both Postgres formats are packaged: a client that imports nothing of splitsource reads
    a table with spark.read, then its changes with an AvailableNow stream."""
    with postgres.connect(postgres_database) as db:
        db.execute("CREATE TABLE items (id bigint PRIMARY KEY, v text NOT NULL)")
        db.execute("INSERT INTO items SELECT i, 'v' || i FROM generate_series(1, 500) i")
    url = f"postgresql://127.0.0.1:{postgres.port}/{postgres_database}"
    result = server.run(
        """
        url, user, password, out = args
        table = {"url": url, "user": user, "password": password, "dbtable": "items"}
        read = spark.read.format("splitsource.postgres").options(**table).load()
        query = (spark.readStream.format("splitsource.postgres_changes").options(**table)
                 .option("slotName", "over_connect").option("snapshotLocation", out + "/chunks")
                 .option("stateLocation", out + "/state").load()
                 .writeStream.format("parquet").option("path", out + "/sink")
                 .option("checkpointLocation", out + "/checkpoint")
                 .trigger(availableNow=True).start())
        query.awaitTermination(120)
        changes = spark.read.parquet(out + "/sink")
        report(read=sorted(row.id for row in read.select("id").collect()),
               changes=sorted((row.op, row.after.id) for row in changes.collect()))
        """,
        url,
        postgres.user,
        postgres.password,
        str(tmp_path),
    )
    assert result["read"] == list(range(1, 501))
    assert result["changes"] == [["r", i] for i in range(1, 501)]
