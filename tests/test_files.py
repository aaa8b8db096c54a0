"""splitsource.files through real Spark: every format against Spark's own readers, and streams."""

from __future__ import annotations

import gzip
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark import cloudpickle
from pyspark.sql.types import StructType

from helpers.file_parity import files, same_rows
from sources.files.source import FileSource
from sources.spark import register
from sources.spark.datasource import data_source_for

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

pytestmark = pytest.mark.spark

ROWS = 20_000


@pytest.fixture(scope="module", autouse=True)
def registered(spark: SparkSession) -> None:
    register(spark, FileSource)


def table(start: int = 0, rows: int = ROWS) -> pa.Table:
    ids = pa.array(range(start, start + rows), pa.int64())
    return pa.table(
        {
            "id": ids,
            "name": pa.array([f"name-{i}" for i in range(start, start + rows)]),
            "score": pa.array([i * 0.5 for i in range(start, start + rows)]),
        }
    )


def test_parquet_with_hive_partitions_matches_sparks_reader(
    spark: SparkSession, tmp_path: Path
) -> None:
    for year in (2023, 2024):
        for part in range(3):
            directory = tmp_path / f"year={year}" / f"region=r{part}"
            directory.mkdir(parents=True)
            pq.write_table(
                table(part * ROWS, ROWS), directory / "data.parquet", row_group_size=5_000
            )

    ours = files(spark, "parquet", tmp_path, maxSplitBytes="64k")

    assert ours.columns == ["id", "name", "score", "year", "region"]
    same_rows(ours, spark.read.parquet(str(tmp_path)))


def test_csv_cut_into_byte_ranges_matches_sparks_reader(
    spark: SparkSession, tmp_path: Path
) -> None:
    path = tmp_path / "data.csv"
    table().to_pandas().to_csv(path, index=False)

    ours = files(spark, "csv", path, header="true", maxSplitBytes="32k")
    theirs = spark.read.schema(ours.schema).option("header", "true").csv(str(path))

    assert ours.rdd.getNumPartitions() >= 1
    same_rows(ours, theirs)


def test_gzipped_json_lines_match_sparks_reader(spark: SparkSession, tmp_path: Path) -> None:
    with gzip.open(tmp_path / "data.json.gz", "wt") as out:
        for i in range(ROWS):
            out.write(f'{{"id": {i}, "name": "n{i}", "score": {i * 0.25}}}\n')

    ours = files(spark, "json", tmp_path)
    theirs = spark.read.schema(ours.schema).json(str(tmp_path))

    same_rows(ours, theirs)


def test_text_lines_match_sparks_text_reader(spark: SparkSession, tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("".join(f"line {i}\r\n" for i in range(5_000)) + "\nlast")

    ours = files(spark, "text", tmp_path, maxSplitBytes="8k")

    same_rows(ours, spark.read.text(str(tmp_path)))


def test_a_read_smaller_than_one_partition_still_uses_every_core(
    spark: SparkSession, tmp_path: Path
) -> None:
    for i in range(4):
        pq.write_table(table(i * 1_000, 1_000), tmp_path / f"part-{i}.parquet")

    ours = files(spark, "parquet", tmp_path)

    assert ours.rdd.getNumPartitions() == spark.sparkContext.defaultParallelism == 2
    assert ours.count() == 4_000


def test_many_small_files_share_partitions(spark: SparkSession, tmp_path: Path) -> None:
    for i in range(120):
        pq.write_table(table(i * 10, 10), tmp_path / f"part-{i:04d}.parquet")

    ours = files(spark, "parquet", tmp_path)

    assert ours.count() == 1_200
    assert ours.rdd.getNumPartitions() < 10


def test_a_path_matching_nothing_is_a_clear_error(spark: SparkSession, tmp_path: Path) -> None:
    with pytest.raises(Exception, match="matches no files"):
        files(spark, "csv", tmp_path / "nothing-*.csv").count()


def test_the_listing_kept_for_a_dataframe_travels_neither_to_tasks_nor_to_streams(
    tmp_path: Path,
) -> None:
    (tmp_path / "kept-a.csv").write_text("id\n1\n")
    options = {"path": str(tmp_path), "format": "csv", "stateLocation": str(tmp_path / "s")}
    data_source = data_source_for(FileSource)(options)
    schema = data_source.schema()
    assert isinstance(schema, StructType)
    reader = data_source.reader(schema)
    task = cloudpickle.dumps(reader)  # type: ignore[no-untyped-call]
    (tmp_path / "kept-b.csv").write_text("id\n2\n")
    planned = [split for part in reader.partitions() for split in part.splits]  # type: ignore[attr-defined]
    assert len(planned) == 1 and b"kept-a.csv" in planned[0]
    assert b"kept-a.csv" not in task
    assert data_source.streamReader(schema).source.listed is None  # type: ignore[attr-defined]


def stream(spark: SparkSession, path: Path, schema: Any, **options: Any) -> DataFrame:
    reader = (
        spark.readStream.format("splitsource.files")
        .option("format", "parquet")
        .option("stateLocation", str(path.parent / "state"))
    )
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.schema(schema).load(str(path))


def test_a_file_stream_without_state_location_fails_at_start(
    spark: SparkSession, tmp_path: Path
) -> None:
    df = spark.readStream.format("splitsource.files").option("format", "csv")
    df = df.schema("id bigint").load(str(tmp_path))
    with pytest.raises(
        Exception, match=r"Option 'stateLocation' of splitsource\.files: is required"
    ):
        df.writeStream.format("noop").start().awaitTermination(60)


def test_files_added_while_streaming_are_read_exactly_once(
    spark: SparkSession, tmp_path: Path
) -> None:
    incoming = tmp_path / "in"
    incoming.mkdir()
    pq.write_table(table(0, 100), incoming / "f-000.parquet")
    schema = files(spark, "parquet", incoming).schema
    df = stream(spark, incoming, schema, maxFilesPerTrigger=2, discoveryInterval="100ms")
    query = (
        df.writeStream.format("parquet")
        .option("path", str(tmp_path / "out"))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    for i in range(1, 10):
        pq.write_table(table(i * 100, 100), incoming / f"f-{i:03d}.parquet")
        time.sleep(0.3)
    deadline = time.monotonic() + 120
    while rows_in(spark, tmp_path / "out", schema) < 1_000:
        assert time.monotonic() < deadline
        time.sleep(0.5)
    query.stop()

    out = spark.read.parquet(str(tmp_path / "out"))
    assert out.count() == out.select("id").distinct().count() == 1_000
    assert max(p["numInputRows"] for p in query.recentProgress) <= 200


def rows_in(spark: SparkSession, table: Path, schema: Any) -> int:
    """Rows committed to a parquet sink so far (0 before its first file)."""
    if not (table / "_spark_metadata").exists():
        return 0
    return spark.read.schema(schema).parquet(str(table)).count()


@pytest.mark.parametrize("clean", ["archive", "delete"])
def test_clean_source_handles_every_committed_file_including_the_last_batch(
    spark: SparkSession, tmp_path: Path, clean: str
) -> None:
    incoming = tmp_path / "in"
    incoming.mkdir()
    for i in range(5):
        pq.write_table(table(i * 100, 100), incoming / f"f-{i}.parquet")
    schema = files(spark, "parquet", incoming).schema
    archive = tmp_path / "archive"
    df = stream(
        spark,
        incoming,
        schema,
        maxFilesPerTrigger=2,
        cleanSource=clean,
        sourceArchiveDir=str(archive),
    )

    query = (
        df.writeStream.format("parquet")
        .option("path", str(tmp_path / "out"))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(300)

    assert spark.read.parquet(str(tmp_path / "out")).count() == 500
    assert list(incoming.iterdir()) == []
    archived = sorted(path.name for path in archive.rglob("*.parquet"))
    assert archived == ([f"f-{i}.parquet" for i in range(5)] if clean == "archive" else [])


def test_latest_first_admits_the_newest_files_first_and_max_file_age_ignores_old_ones(
    spark: SparkSession, tmp_path: Path
) -> None:
    incoming = tmp_path / "in"
    incoming.mkdir()
    now = time.time()
    for i in range(6):  # f-5 is the newest; f-0 is two days older than it
        path = incoming / f"f-{i}.parquet"
        pq.write_table(table(i * 100, 100), path)
        age = 2 * 86400 if i == 0 else (6 - i) * 60
        os.utime(path, (now - age, now - age))
    batches: dict[int, list[int]] = {}

    def keep(batch: DataFrame, batch_id: int) -> None:
        found = sorted({row.id // 100 for row in batch.select("id").collect()})
        if found:
            batches[batch_id] = found

    schema = files(spark, "parquet", incoming).schema
    df = stream(spark, incoming, schema, latestFirst=True, maxFilesPerTrigger=2, maxFileAge="1d")
    query = (
        df.writeStream.foreachBatch(keep)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(300)

    assert [batches[key] for key in sorted(batches)] == [[4, 5], [2, 3], [1]]


@pytest.mark.slow
def test_a_batch_of_20_000_files_logs_a_small_offset_and_reads_each_row_once(
    spark: SparkSession, tmp_path: Path
) -> None:
    incoming = tmp_path / "in"
    incoming.mkdir()
    for n in range(20_000):
        (incoming / f"f-{n:05d}.csv").write_text(f"id\n{n}\n")
    checkpoint, out = tmp_path / "checkpoint", tmp_path / "out"
    query = (
        spark.readStream.format("splitsource.files")
        .options(format="csv", header="true", stateLocation=str(tmp_path / "state"))
        .schema("id int")
        .load(str(incoming))
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(600)
    assert query.exception() is None

    logged = [path.stat().st_size for path in (checkpoint / "offsets").iterdir()]
    assert logged and max(logged) <= 64 << 10, logged
    ids = spark.read.parquet(str(out))
    assert ids.count() == ids.select("id").distinct().count() == 20_000
