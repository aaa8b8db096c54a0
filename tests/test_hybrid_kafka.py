"""``splitsource.hybrid``: a topic's archive in Parquet files, then the topic from the real broker.

The archive is the topic's own records, read back and written as files
(:mod:`helpers.archives`), so offsets and timestamps are Kafka's.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F

from enumerators.base import EnumeratorContext, ReadMode
from enumerators.files.enumerator import FileEnumeratorState, FileEnumeratorStateSerializer
from enumerators.hybrid.archive_then_kafka import archive_ends
from enumerators.hybrid.enumerator import HybridState, HybridStateSerializer
from enumerators.kafka.enumerator import KafkaEnumeratorState, KafkaEnumeratorStateSerializer
from enumerators.runtime.admission import RecordSharing
from helpers.archives import archive, archive_in_files, topic_records
from helpers.hybrids import run_available_now
from readers.files.formats.parquet import ParquetFormat
from sources.errors import InvalidOptionError
from sources.files.source import FileSource
from sources.files.splits import FileSplit
from sources.hybrid.archive_then_kafka import ArchiveThenKafkaSource
from sources.kafka.splits import KafkaPartitionSplit
from sources.serialization import frame, unframe
from sources.spark.datasource import data_source_for, plan_bounded
from sources.spark.metrics import source_metrics
from sources.spark.prometheus import PrometheusListener
from sources.testing.planning import logged, next_batch, partition_splits, stream_reader

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import DataStreamReader

    from helpers.kafka_broker import KafkaBroker

FORMAT = "splitsource.hybrid"


def options(broker: KafkaBroker | str, name: str, path: Path, **more: Any) -> dict[str, str]:
    bootstrap = broker if isinstance(broker, str) else broker.bootstrap
    given = {
        "archive.format": "parquet",
        "archive.path": str(path),
        "live.kafka.bootstrap.servers": bootstrap,
        "live.subscribe": name,
        **more,
    }
    return {key: str(value) for key, value in given.items()}


def positions(rows: list[Any]) -> Counter[tuple[int, int]]:
    return Counter((row["partition"], row["offset"]) for row in rows)


def written(broker: KafkaBroker, name: str, partitions: int, per_partition: int) -> None:
    for partition in range(partitions):
        records = [
            {"key": f"k{partition}", "value": f"v{partition}-{i}"} for i in range(per_partition)
        ]
        broker.produce(name, records, partition=partition)


# --- load() checks, no broker needed --------------------------------------------------


def _files(path: Path, table: pa.Table) -> Path:
    path.mkdir()
    pq.write_table(table, path / "part-0.parquet")
    return path


def _offsets_archive(path: Path) -> Path:
    """An archive of one record with ``topic``, ``partition`` and ``offset`` only."""
    return _files(
        path, pa.table({"topic": ["t"], "partition": pa.array([0], pa.int32()), "offset": [1]})
    )


def test_offsets_handoff_over_an_archive_without_offsets_fails_at_load(tmp_path: Path) -> None:
    path = _files(
        tmp_path / "a",
        pa.table({"topic": ["t"], "timestamp": pa.array([1], pa.timestamp("us", "UTC"))}),
    )
    with pytest.raises(
        InvalidOptionError,
        match=r"'handoff'.*offsets needs the archive's columns topic, partition, offset"
        r".*has no partition, offset.*handoff=timestamp",
    ):
        ArchiveThenKafkaSource.from_spark_options(options("127.0.0.1:1", "t", path))


def test_offsets_handoff_over_an_archive_whose_topic_is_binary_fails_at_load(
    tmp_path: Path,
) -> None:
    """Binary topics would match no Kafka topic name, and Kafka would start at
    live.startingOffsets instead of one past the archive."""
    table = pa.table(
        {"topic": pa.array([b"t"]), "partition": pa.array([0], pa.int32()), "offset": [1]}
    )
    path = _files(tmp_path / "a", table)
    with pytest.raises(
        InvalidOptionError, match=r"'handoff'.*has it as BINARY; write the topic as a string"
    ):
        ArchiveThenKafkaSource.from_spark_options(options("127.0.0.1:1", "t", path))


def test_timestamp_handoff_over_an_archive_without_timestamps_fails_at_load(tmp_path: Path) -> None:
    path = _offsets_archive(tmp_path / "a")
    with pytest.raises(
        InvalidOptionError, match=r"timestamp needs the archive's columns timestamp"
    ):
        ArchiveThenKafkaSource.from_spark_options(
            options("127.0.0.1:1", "t", path, handoff="timestamp")
        )


def test_a_kafka_start_time_with_offsets_handoff_fails_at_load(tmp_path: Path) -> None:
    path = _offsets_archive(tmp_path / "a")
    with pytest.raises(InvalidOptionError, match=r"'live\.startingTimestamp'.*handoff=offsets"):
        ArchiveThenKafkaSource.from_spark_options(
            options("127.0.0.1:1", "t", path, **{"live.startingTimestamp": "5"})
        )


def test_max_event_time_drift_fails_at_load_the_hybrid_does_not_know_event_time(
    tmp_path: Path,
) -> None:
    """As docs/event-time.md and docs/hybrid.md say; the watermark is Spark's alone."""
    given = options("127.0.0.1:1", "t", _offsets_archive(tmp_path / "a"))
    with pytest.raises(
        InvalidOptionError,
        match=r"'maxEventTimeDrift' of splitsource\.hybrid.*does not know the event time",
    ):
        data_source_for(ArchiveThenKafkaSource)({**given, "maxEventTimeDrift": "1 minute"})


def test_an_unknown_prefix_fails_at_load_naming_it(tmp_path: Path) -> None:
    path = _offsets_archive(tmp_path / "a")
    with pytest.raises(
        InvalidOptionError, match=r"'arhive\.format'.*archive\.\*, .*handoff, live\.\*"
    ):
        ArchiveThenKafkaSource.from_spark_options(
            {**options("127.0.0.1:1", "t", path), "arhive.format": "json"}
        )


def test_the_rows_have_the_archives_columns_with_kafkas_cast_to_them(tmp_path: Path) -> None:
    table = pa.table(
        {"value": ["x"], "topic": ["t"], "partition": pa.array([0], pa.int64()), "offset": [1]}
    )
    source, _ = ArchiveThenKafkaSource.from_spark_options(
        options("127.0.0.1:1", "t", _files(tmp_path / "a", table))
    )
    assert source.stage_schema(0).names == ["value", "topic", "partition", "offset"]


def test_max_offsets_per_trigger_is_given_once_for_the_whole_read(tmp_path: Path) -> None:
    path = _offsets_archive(tmp_path / "a")
    given = options("127.0.0.1:1", "t", path, stateLocation=tmp_path / "state")
    reader = stream_reader(ArchiveThenKafkaSource, {**given, "maxOffsetsPerTrigger": 50})
    assert reader.limits.record_sharing is RecordSharing.PROPORTIONAL
    assert reader.limits.max_records == 50
    with pytest.raises(InvalidOptionError, match=r"'live\.maxOffsetsPerTrigger'.*without a prefix"):
        data_source_for(ArchiveThenKafkaSource)({**given, "live.maxOffsetsPerTrigger": "50"})
    both = {**given, "maxOffsetsPerTrigger": "50", "maxRecordsPerTrigger": "50"}
    with pytest.raises(InvalidOptionError, match=r"'maxOffsetsPerTrigger'.*maxRecordsPerTrigger"):
        data_source_for(ArchiveThenKafkaSource)(both)


def _archive_of(path: Path) -> tuple[FileSource, pa.Schema, list[FileSplit]]:
    """The archive stage of a hybrid over ``path``, its schema, and the splits of its files."""
    source, _ = ArchiveThenKafkaSource.from_spark_options(options("127.0.0.1:1", "t", path))
    archive = source.sources[0]
    assert isinstance(archive, FileSource)
    return archive, source.stage_schema(0), plan_bounded(archive)


def _rows_read(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The Parquet files whose rows are read from now on (footers aside)."""
    read: list[str] = []
    original = ParquetFormat.read_range

    def counted(self: ParquetFormat, fs: Any, path: str, *args: Any, **kwargs: Any) -> Any:
        read.append(Path(path).name)
        return original(self, fs, path, *args, **kwargs)

    monkeypatch.setattr(ParquetFormat, "read_range", counted)
    return read


def test_the_offsets_handoff_reads_rows_only_of_files_whose_statistics_do_not_tell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A row group of one topic partition tells its last offset by its statistics; a row
    group of two partitions is read."""
    path = tmp_path / "archive"
    path.mkdir()

    def records(partition: int, offsets: range) -> pa.Table:
        return pa.table(
            {
                "topic": ["t"] * len(offsets),
                "partition": pa.array([partition] * len(offsets), pa.int32()),
                "offset": pa.array(offsets, pa.int64()),
            }
        )

    with pq.ParquetWriter(path / "grouped.parquet", records(0, range(1)).schema) as grouped:
        grouped.write_table(records(0, range(0, 40)))  # a row group per partition
        grouped.write_table(records(1, range(0, 7)))
    mixed = pa.concat_tables([records(1, range(7, 12)), records(2, range(0, 3))])
    pq.write_table(mixed, path / "mixed.parquet")  # one row group, two partitions
    read = _rows_read(monkeypatch)

    assert archive_ends(*_archive_of(path)) == {("t", 0): 39, ("t", 1): 11, ("t", 2): 2}
    assert read == ["mixed.parquet"]


def test_the_offsets_handoff_takes_topic_and_partition_from_partition_directories(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for partition, last in ((0, 9), (1, 4)):
        directory = tmp_path / "archive" / "topic=t" / f"partition={partition}"
        directory.mkdir(parents=True)
        pq.write_table(pa.table({"offset": range(last + 1)}), directory / "part.parquet")
    read = _rows_read(monkeypatch)

    assert archive_ends(*_archive_of(tmp_path / "archive")) == {("t", 0): 9, ("t", 1): 4}
    assert read == []


# --- with the broker -----------------------------------------------------------------


@pytest.mark.kafka
def test_max_offsets_per_trigger_shares_kafka_by_sparks_rule_and_archive_files_fairly(
    kafka_broker: KafkaBroker, topic: Callable[..., str], tmp_path: Path
) -> None:
    """Files are read whole, one position each: Spark's rule would grant every file in
    flight its one, so the archive side shares the limit fairly, one file a record."""
    name = topic(partitions=3)

    def produce() -> None:
        for partition, count in enumerate((10, 20, 30)):
            kafka_broker.produce(name, [f"v{i}" for i in range(count)], partition=partition)

    produce()
    archive_in_files(kafka_broker, name, tmp_path / "archive", files=7)
    produce()  # Kafka's backlogs after the handoff: 10, 20, 30
    given = options(
        kafka_broker,
        name,
        tmp_path / "archive",
        maxOffsetsPerTrigger=6,
        stateLocation=tmp_path / "state",
    )
    reader = stream_reader(ArchiveThenKafkaSource, given)
    offsets = [logged(reader.initialOffset())]
    plans = []
    for _ in range(3):  # six files, the seventh, then Kafka
        offsets.append(next_batch(reader, offsets[-1]))
        plans.append(partition_splits(reader, reader.partitions(offsets[-2], offsets[-1])))
    reader.stop()
    assert [len(plan) for plan in plans[:2]] == [6, 1]
    assert {s.index for plan in plans[:2] for s in plan} == {0}
    kafka = {s.split.partition: (s.split.start, s.split.end) for s in plans[2]}
    assert kafka == {0: (10, 11), 1: (20, 22), 2: (30, 33)}  # 6 * 10/60, 6 * 20/60, ...


@pytest.mark.kafka
def test_the_offsets_handoff_starts_each_partition_one_past_the_archive(
    kafka_broker: KafkaBroker, topic: Callable[..., str], tmp_path: Path
) -> None:
    name = topic(partitions=3)
    written(kafka_broker, name, 3, 20)
    archive(kafka_broker, name, tmp_path / "archive", {0: 12, 1: 20})  # partition 2 absent
    reader = stream_reader(
        ArchiveThenKafkaSource,
        options(
            kafka_broker,
            name,
            tmp_path / "archive",
            **{"live.startingOffsets": "earliest", "stateLocation": tmp_path / "state"},
        ),
    )
    start = logged(reader.initialOffset())
    end = next_batch(reader, start)
    first = partition_splits(reader, reader.partitions(start, end))
    assert {split.index for split in first} == {0}
    later = next_batch(reader, end)
    kafka = {
        s.split.partition: (s.split.start, s.split.end)
        for s in partition_splits(reader, reader.partitions(end, later))
    }
    reader.stop()
    assert kafka == {0: (12, 20), 2: (0, 20)}  # partition 1 is archived whole


@pytest.mark.kafka
def test_files_arriving_during_the_file_phase_are_read_before_the_switch(
    kafka_broker: KafkaBroker, topic: Callable[..., str], tmp_path: Path
) -> None:
    name = topic(partitions=1)
    written(kafka_broker, name, 1, 30)
    archive(kafka_broker, name, tmp_path / "archive", {0: 10}, name="early")
    given = options(
        kafka_broker,
        name,
        tmp_path / "archive",
        maxFilesPerTrigger=1,
        stateLocation=tmp_path / "state",
    )
    reader = stream_reader(ArchiveThenKafkaSource, given)
    offsets = [logged(reader.initialOffset())]
    offsets.append(next_batch(reader, offsets[-1]))
    archive(kafka_broker, name, tmp_path / "archive", {0: 25}, name="late")  # offsets 0..24
    plans = []
    for _ in range(2):  # the late file, then the first Kafka batch
        offsets.append(next_batch(reader, offsets[-1]))
        plans.append(partition_splits(reader, reader.partitions(offsets[-2], offsets[-1])))
    reader.stop()
    assert [{s.index for s in plan} for plan in plans] == [{0}, {1}]
    kafka = [s.split for s in plans[1]]
    assert [(s.partition, s.start) for s in kafka] == [(0, 25)]


@pytest.fixture
def spark(spark: SparkSession) -> SparkSession:
    """The test session with splitsource.hybrid registered."""
    from sources.spark import register

    register(spark, ArchiveThenKafkaSource)
    return spark


def hybrid_rows(frame: DataFrame) -> list[dict[str, Any]]:
    return [row.asDict() for row in frame.collect()]


@pytest.mark.kafka
@pytest.mark.spark
def test_a_bounded_read_is_the_archive_then_kafka_up_to_its_latest_offsets(
    spark: SparkSession, kafka_broker: KafkaBroker, topic: Callable[..., str], tmp_path: Path
) -> None:
    name = topic(partitions=2)
    written(kafka_broker, name, 2, 40)
    archived = archive(kafka_broker, name, tmp_path / "archive", {0: 25, 1: 3})
    frame = (
        spark.read.format(FORMAT)
        .options(**options(kafka_broker, name, tmp_path / "archive"))
        .load()
    )
    assert frame.schema.simpleString().startswith(
        "struct<key:binary,value:string,topic:string,partition:int"
    )
    rows = hybrid_rows(frame)
    assert positions(rows) == Counter({(p, o): 1 for p in (0, 1) for o in range(40)})
    assert sum(1 for row in rows if row["value"] is not None) == 80
    assert archived.num_rows == 28


@pytest.mark.kafka
@pytest.mark.spark
def test_available_now_reads_through_the_switch_exactly_once_under_admission_limits(
    spark: SparkSession, kafka_broker: KafkaBroker, topic: Callable[..., str], tmp_path: Path
) -> None:
    name = topic(partitions=2)
    written(kafka_broker, name, 2, 30)
    archive(kafka_broker, name, tmp_path / "archive", {0: 10, 1: 5})
    given = options(
        kafka_broker,
        name,
        tmp_path / "archive",
        maxFilesPerTrigger=1,
        maxOffsetsPerTrigger=7,
        stateLocation=tmp_path / "state",
        **{"live.startingOffsets": "earliest"},
    )

    def run() -> Any:
        query = run_available_now(spark.readStream.format(FORMAT).options(**given).load(), tmp_path)
        assert query.exception() is None
        return query

    query = run()
    sizes = [p.numInputRows for p in query.recentProgress if p.numInputRows]
    assert max(sizes) <= 10 and len(sizes) >= 2 + (20 + 25) // 7
    assert positions(hybrid_rows(spark.read.parquet(str(tmp_path / "out")))) == Counter(
        {(p, o): 1 for p in (0, 1) for o in range(30)}
    )
    written(kafka_broker, name, 2, 5)
    run()
    assert positions(hybrid_rows(spark.read.parquet(str(tmp_path / "out")))) == Counter(
        {(p, o): 1 for p in (0, 1) for o in range(35)}
    )


def over_an_empty_archive(
    reader: DataStreamReader, broker: KafkaBroker, name: str, partitions: int, tmp_path: Path
) -> DataFrame:
    """The hybrid stream of an archive directory with no files yet, then topic ``name``,
    whose ``partitions`` hold 5 records each, from earliest."""
    written(broker, name, partitions, 5)
    (tmp_path / "archive").mkdir()
    given = options(
        broker,
        name,
        tmp_path / "archive",
        stateLocation=tmp_path / "state",
        **{"live.startingOffsets": "earliest"},
    )
    return reader.format(FORMAT).options(**given).load()


@pytest.mark.kafka
@pytest.mark.spark
def test_a_stream_over_an_empty_archive_starts_on_kafka_with_kafkas_columns(
    spark: SparkSession, kafka_broker: KafkaBroker, topic: Callable[..., str], tmp_path: Path
) -> None:
    frame = over_an_empty_archive(spark.readStream, kafka_broker, topic(partitions=2), 2, tmp_path)
    assert frame.schema.simpleString().startswith(
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,timestamp"
    )
    assert run_available_now(frame, tmp_path).exception() is None
    rows = hybrid_rows(spark.read.parquet(str(tmp_path / "out")))
    assert positions(rows) == Counter({(p, o): 1 for p in (0, 1) for o in range(5)})


@pytest.mark.kafka
@pytest.mark.spark
def test_a_stream_over_an_empty_archive_reads_kafka_in_the_schema_given(
    spark: SparkSession, kafka_broker: KafkaBroker, topic: Callable[..., str], tmp_path: Path
) -> None:
    reader = spark.readStream.schema("value STRING, partition INT, offset BIGINT")
    frame = over_an_empty_archive(reader, kafka_broker, topic(partitions=1), 1, tmp_path)
    assert run_available_now(frame, tmp_path).exception() is None
    rows = spark.read.parquet(str(tmp_path / "out")).orderBy("offset").collect()
    assert [(row.value, row.partition, row.offset) for row in rows] == [
        (f"v0-{i}", 0, i) for i in range(5)
    ]


@pytest.mark.kafka
@pytest.mark.spark
def test_the_timestamp_handoff_starts_kafka_at_the_archives_last_time(
    spark: SparkSession, kafka_broker: KafkaBroker, topic: Callable[..., str], tmp_path: Path
) -> None:
    name = topic(partitions=1)
    # Recent times: the broker's retention (7 days) would delete records stamped older.
    stamps = [int(time.time() * 1000) - 60_000 + 1000 * i for i in range(20)]
    kafka_broker.produce(
        name, [{"value": f"v{i}", "timestamp": t} for i, t in enumerate(stamps)], partition=0
    )
    archive(kafka_broker, name, tmp_path / "archive", {0: 8})
    frame = (
        spark.read.format(FORMAT)
        .options(**options(kafka_broker, name, tmp_path / "archive", handoff="timestamp"))
        .load()
    )
    counts = positions(hybrid_rows(frame))
    # Kafka starts at the first record at or after the archive's last timestamp: that one
    # record (offset 7) is read twice, by the archive and by Kafka; every other once.
    assert counts == Counter({**{(0, o): 1 for o in range(20)}, (0, 7): 2})


@pytest.mark.kafka
@pytest.mark.spark
@pytest.mark.parametrize("fail_on_data_loss", [True, False])
def test_a_kafka_start_already_deleted_by_retention_fails_or_reads_on(
    spark: SparkSession,
    kafka_broker: KafkaBroker,
    topic: Callable[..., str],
    tmp_path: Path,
    fail_on_data_loss: bool,
) -> None:
    """The archive ends at offset 50, but retention has deleted Kafka's records up to 200."""
    from test_kafka_failures import set_retention, wait_for_log_start

    name = topic(partitions=1, config={"internal.segment.bytes": "1024"})

    def produce(numbers: range) -> None:
        for start in range(numbers.start, numbers.stop, 5):  # a batch must fit a segment
            kafka_broker.produce(name, [str(n) for n in range(start, start + 5)], partition=0)

    produce(range(100))
    archive(kafka_broker, name, tmp_path / "archive", {0: 50})
    produce(range(100, 200))
    set_retention(kafka_broker, name, 500)
    wait_for_log_start(kafka_broker, name, 200)
    set_retention(kafka_broker, name, -1)
    produce(range(200, 210))
    given = options(
        kafka_broker,
        name,
        tmp_path / "archive",
        stateLocation=tmp_path / "state",
        **{"live.failOnDataLoss": str(fail_on_data_loss).lower()},
    )
    frame = spark.readStream.format(FORMAT).options(**given).load()
    numbers = frame.selectExpr("CAST(value AS BIGINT) AS n")
    if fail_on_data_loss:
        with pytest.raises(Exception, match=r"offsets \[50, 200\) are gone") as error:
            run_available_now(numbers, tmp_path)
        # The option as the user gives it to splitsource.hybrid, never Kafka's own name.
        assert "set live.failOnDataLoss=false" in str(error.value)
        assert not re.search(r"(?<![\w.])failOnDataLoss", str(error.value))
        return
    assert run_available_now(numbers, tmp_path).exception() is None
    read = sorted(row.n for row in spark.read.parquet(str(tmp_path / "out")).collect())
    assert read == [*range(50), *range(200, 210)]


# --- the state's first version ---------------------------------------------------------

GOLDEN = Path(__file__).parent / "golden"
GOLDEN_TOPIC = "hybrid-golden"
GOLDEN_ARCHIVE_STATE = HybridState(
    0,
    FileEnumeratorState(
        (), {"/golden/archive/part-0.parquet": 1_717_200_000_123}, (), 1_717_200_000_123
    ),
    {},
)
GOLDEN_LIVE_STATE = HybridState(
    1,
    KafkaEnumeratorState(
        True,
        frozenset({(GOLDEN_TOPIC, 0), (GOLDEN_TOPIC, 1)}),
        (KafkaPartitionSplit(GOLDEN_TOPIC, 1, 7, None),),
    ),
    {"startingOffsets": '{"hybrid-golden":{"0":5,"1":7}}'},
)
STATE_SERIALIZER = HybridStateSerializer(
    [FileEnumeratorStateSerializer(), KafkaEnumeratorStateSerializer()]
)


def test_the_version_1_state_before_the_switch_still_reads_the_same() -> None:
    data = (GOLDEN / "hybrid_kafka_state_v1_archive.bin").read_bytes()
    assert unframe(STATE_SERIALIZER, data, "golden state") == GOLDEN_ARCHIVE_STATE


def test_the_version_1_state_after_the_switch_still_reads_and_writes_the_same() -> None:
    data = (GOLDEN / "hybrid_kafka_state_v1_live.bin").read_bytes()
    assert unframe(STATE_SERIALIZER, data, "golden state") == GOLDEN_LIVE_STATE
    assert frame(STATE_SERIALIZER, GOLDEN_LIVE_STATE) == data


@pytest.mark.kafka
def test_a_stream_restores_from_the_version_1_state_after_the_switch(
    kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    """The state holds Kafka's start: restoring needs neither the archive nor the hook."""
    kafka_broker.create_topic(GOLDEN_TOPIC, 2)
    written(kafka_broker, GOLDEN_TOPIC, 2, 10)
    path = _files(tmp_path / "a", topic_records(kafka_broker, GOLDEN_TOPIC))
    source, _ = ArchiveThenKafkaSource.from_spark_options(options(kafka_broker, GOLDEN_TOPIC, path))
    data = (GOLDEN / "hybrid_kafka_state_v1_live.bin").read_bytes()
    state = unframe(source.enumerator_state_serializer(), data, "golden state")
    enumerator = source.restore_enumerator(EnumeratorContext(ReadMode.STREAM), state)
    enumerator.start()
    try:
        taken = enumerator.next_splits()
        assert [(s.split_id, s.split.start) for s in taken] == [(f"1:{GOLDEN_TOPIC}-1", 7)]
        assert enumerator.latest_positions(taken) == {f"1:{GOLDEN_TOPIC}-1": 10}
    finally:
        enumerator.close()


@pytest.mark.kafka
@pytest.mark.spark
def test_the_event_time_watermark_moves_on_after_the_switch(
    spark: SparkSession, kafka_broker: KafkaBroker, topic: Callable[..., str], tmp_path: Path
) -> None:
    """Flink's users saw watermarks stall after the switch; here Spark derives the watermark
    from the rows, and it keeps rising through the Kafka batches."""
    name = topic(partitions=1)
    base = int(time.time() * 1000) - 120_000
    records = [{"value": str(i), "timestamp": base + 1000 * i} for i in range(60)]
    kafka_broker.produce(name, records, partition=0)
    archive(kafka_broker, name, tmp_path / "archive", {0: 20})
    given = options(
        kafka_broker,
        name,
        tmp_path / "archive",
        maxOffsetsPerTrigger=10,
        stateLocation=tmp_path / "state",
    )
    counts = (
        spark.readStream.format(FORMAT)
        .options(**given)
        .load()
        .withWatermark("timestamp", "1 second")
        .groupBy(F.window("timestamp", "5 seconds"))
        .count()
    )
    query = run_available_now(counts, tmp_path)
    assert query.exception() is None
    marks = [p.eventTime.get("watermark") for p in query.recentProgress if p.numInputRows]
    archive_end = base + 1000 * 19
    kafka_marks = [m for m in marks[1:] if m]
    assert kafka_marks, marks
    last = pd.Timestamp(kafka_marks[-1]).value // 1_000_000
    assert last > archive_end + 20_000, (marks, archive_end)


@pytest.mark.kafka
@pytest.mark.spark
def test_an_archive_spark_wrote_gives_kafkas_timestamps_a_watermark_can_be_defined_on(
    spark: SparkSession, kafka_broker: KafkaBroker, topic: Callable[..., str], tmp_path: Path
) -> None:
    """Spark writes timestamps as INT96 by default; the archive's are instants, as Kafka's."""
    name = topic(partitions=1)
    base = int(time.time() * 1000) - 120_000
    kafka_broker.produce(
        name, [{"value": str(i), "timestamp": base + 1000 * i} for i in range(30)], partition=0
    )
    archive(kafka_broker, name, tmp_path / "plain", {0: 20})
    zone = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    try:
        spark.read.parquet(str(tmp_path / "plain")).write.parquet(str(tmp_path / "archive"))
        stream = (
            spark.readStream.format(FORMAT)
            .options(**options(kafka_broker, name, tmp_path / "archive"))
            .option("stateLocation", str(tmp_path / "state"))
            .load()
        )
        assert dict(stream.dtypes)["timestamp"] == "timestamp"
        query = run_available_now(stream.withWatermark("timestamp", "1 second"), tmp_path)
        assert query.exception() is None
    finally:
        spark.conf.set("spark.sql.session.timeZone", zone)
    (written,) = {
        pq.ParquetFile(f).schema.column(5).physical_type
        for f in (tmp_path / "archive").glob("*.parquet")
    }
    assert written == "INT96"
    rows = spark.read.parquet(str(tmp_path / "out")).orderBy("offset").collect()
    stamps = [round(row["timestamp"].timestamp() * 1000) for row in rows]  # local → epoch
    assert stamps == [base + 1000 * i for i in range(30)]


@pytest.mark.kafka
@pytest.mark.spark
def test_the_kafka_stages_lag_gauges_carry_topic_and_partition_labels(
    spark: SparkSession, kafka_broker: KafkaBroker, topic: Callable[..., str], tmp_path: Path
) -> None:
    """The docs' per-topic PromQL works on a hybrid; archive files have no such labels."""
    name = topic(partitions=2)
    written(kafka_broker, name, 2, 10)
    archive(kafka_broker, name, tmp_path / "archive", {0: 4, 1: 4})
    given = options(kafka_broker, name, tmp_path / "archive", stateLocation=tmp_path / "state")
    query = run_available_now(spark.readStream.format(FORMAT).options(**given).load(), tmp_path)
    assert query.exception() is None
    on_kafka = [
        progress
        for progress in query.recentProgress
        if source_metrics(progress)[FORMAT].get("offsetsBehindLatest")
    ]
    assert on_kafka, query.recentProgress
    exporter = PrometheusListener("")
    exporter.onQueryProgress(SimpleNamespace(progress=on_kafka[-1]))
    [lag] = [f for f in exporter.collect() if f.name == "splitsource_offsets_behind_latest"]
    labels = {sample.labels["split"]: sample.labels for sample in lag.samples}
    assert {(split, ls["topic"], ls["partition"]) for split, ls in labels.items()} == {
        (f"1:{name}-0", name, "0"),
        (f"1:{name}-1", name, "1"),
    }
