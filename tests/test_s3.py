"""The file source on a real S3 endpoint (moto's server over HTTP, through s3fs), as a user
would point it at object storage: URLs, keys and endpoint in ``storageOptions``."""

from __future__ import annotations

import gzip
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from helpers.s3_faults import Fault, FaultyProxy
from helpers.s3_server import SECRET_KEY, S3Server
from sources.spark import stop_gracefully

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

pytestmark = pytest.mark.spark

ROWS = [{"id": i, "name": f"name-{i}"} for i in range(300)]
SCHEMA = "id bigint, name string"


def files_read(spark: SparkSession, s3: S3Server, file_format: str, **options: str) -> Any:
    return (
        spark.read.format("splitsource.files")
        .option("format", file_format)
        .option("storageOptions", json.dumps(s3.storage_options()))
        .options(**options)
    )


def ids(frame: DataFrame) -> list[int]:
    return sorted(row.id for row in frame.select("id").collect())


def write_every_format(s3: S3Server, root: str) -> None:
    """The rows as Parquet, CSV, gzipped JSON Lines and text, in three objects each."""
    fs = s3.fs()
    for part in range(3):
        rows = ROWS[part * 100 : (part + 1) * 100]
        table = pa.Table.from_pylist(rows)
        with fs.open(f"{root}/parquet/part-{part}.parquet", "wb") as out:
            pq.write_table(table, out)
        csv = "id,name\n" + "".join(f"{r['id']},{r['name']}\n" for r in rows)
        fs.pipe(f"{root}/csv/part-{part}.csv", csv.encode())
        lines = "".join(json.dumps(r) + "\n" for r in rows)
        fs.pipe(f"{root}/json/part-{part}.json.gz", gzip.compress(lines.encode()))
        fs.pipe(f"{root}/text/part-{part}.txt", "".join(f"{r['id']}\n" for r in rows).encode())


def write_json_objects(s3: S3Server, prefix: str, firsts: range | tuple[int, ...]) -> None:
    """One object of 50 rows under ``prefix`` (``bucket/path``) for each first id."""
    fs = s3.fs()
    for first in firsts:
        body = "".join(json.dumps({"id": i, "name": "x"}) + "\n" for i in range(first, first + 50))
        fs.pipe(f"{prefix}/part-{first:05d}.json", body.encode())


def json_stream(
    spark: SparkSession, path: str, tmp_path: Path, schema: str = SCHEMA, **options: Any
) -> Any:
    """A JSON file stream of ``path`` into a parquet sink and checkpoint under ``tmp_path``."""
    return (
        spark.readStream.format("splitsource.files")
        .option("format", "json")
        .options(**options)
        .schema(schema)
        .load(path)
        .writeStream.format("parquet")
        .option("path", str(tmp_path / "sink"))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
    )


def run_available_now(writer: Any) -> None:
    query = writer.trigger(availableNow=True).start()
    query.awaitTermination(180)
    assert query.exception() is None, query.exception()


def test_bounded_reads_of_every_format_from_s3(
    spark: SparkSession, s3: S3Server, bucket: str
) -> None:
    root = f"s3://{bucket}/lake"
    write_every_format(s3, root)
    expected = [row["id"] for row in ROWS]

    assert ids(files_read(spark, s3, "parquet").load(f"{root}/parquet")) == expected
    csv = files_read(spark, s3, "csv", header="true").schema(SCHEMA).load(f"{root}/csv")
    assert ids(csv) == expected
    assert csv.where("id = 7").first().name == "name-7"
    json_gz = files_read(spark, s3, "json").schema(SCHEMA).load(f"{root}/json")
    assert ids(json_gz) == expected
    text = files_read(spark, s3, "text").load(f"{root}/text")
    assert sorted(int(row.value) for row in text.collect()) == expected


def test_hive_partitions_and_globs_on_s3(spark: SparkSession, s3: S3Server, bucket: str) -> None:
    fs = s3.fs()
    for day in ("2024-01-01", "2024-01-02"):
        for hour in (0, 1):
            table = pa.Table.from_pylist([{"id": hour}])
            with fs.open(f"{bucket}/events/day={day}/hour={hour}/part.parquet", "wb") as out:
                pq.write_table(table, out)
    frame = files_read(spark, s3, "parquet").load(f"s3://{bucket}/events")
    assert frame.schema.simpleString() == "struct<id:bigint,day:date,hour:int>"
    rows = sorted((str(row.day), row.hour, row.id) for row in frame.collect())
    assert rows == [(day, hour, hour) for day in ("2024-01-01", "2024-01-02") for hour in (0, 1)]
    one_day = files_read(spark, s3, "parquet").load(f"s3://{bucket}/events/day=2024-01-02/*")
    assert one_day.count() == 2


def test_a_stream_keeps_its_state_on_s3_with_the_datas_credentials(
    spark: SparkSession, s3: S3Server, bucket: str, tmp_path: Path
) -> None:
    """``stateLocation`` in the same bucket as the data: the state store reaches it with
    the source's ``storageOptions``; the stream resumes from it exactly once."""
    data, state = f"s3://{bucket}/in", f"s3://{bucket}/_state/in"
    storage = json.dumps(s3.storage_options())
    stream = json_stream(spark, data, tmp_path, storageOptions=storage, stateLocation=state)
    write_json_objects(s3, f"{bucket}/in", (0, 50))
    run_available_now(stream)
    write_json_objects(s3, f"{bucket}/in", (100,))
    run_available_now(stream)
    sink = spark.read.parquet(str(tmp_path / "sink"))
    assert ids(sink) == list(range(150))
    checkpoint = [
        path.read_bytes() for path in (tmp_path / "checkpoint").rglob("*") if path.is_file()
    ]
    assert checkpoint and not any(SECRET_KEY.encode() in content for content in checkpoint)


def test_state_on_s3_with_its_own_options_for_a_local_stream_stopped_gracefully(
    spark: SparkSession, s3: S3Server, bucket: str, tmp_path: Path
) -> None:
    """Data on local disk, state on S3: ``stateStorageOptions`` reach it, and so does
    ``stop_gracefully`` given the same options."""
    data = tmp_path / "in"
    data.mkdir()
    (data / "a.json").write_text("".join(json.dumps({"id": i}) + "\n" for i in range(20)))
    state, storage = f"s3://{bucket}/state", s3.storage_options()
    options = {"stateLocation": state, "stateStorageOptions": json.dumps(storage)}
    query = json_stream(spark, str(data), tmp_path, "id bigint", **options).start()
    query.processAllAvailable()
    stop_gracefully(query, state, timeout=120, storage_options=storage)
    assert not query.isActive
    assert ids(spark.read.parquet(str(tmp_path / "sink"))) == list(range(20))


@pytest.fixture(scope="module")
def proxy(s3: S3Server) -> Iterator[FaultyProxy]:
    """The S3 endpoint behind a proxy that injects errors; faults cleared after each test."""
    with FaultyProxy(s3.port) as faulty:
        yield faulty


def through(proxy: FaultyProxy, s3: S3Server) -> str:
    return json.dumps(dict(s3.storage_options(), endpoint_url=proxy.endpoint))


def test_throttling_and_server_errors_are_retried_in_listing_and_reading(
    spark: SparkSession, s3: S3Server, proxy: FaultyProxy, bucket: str
) -> None:
    root = f"s3://{bucket}/lake"
    write_every_format(s3, root)
    faults = [
        proxy.inject(Fault(503, "SlowDown", count=2, method="GET", query="list-type")),
        proxy.inject(Fault(500, "InternalError", count=2, method="GET", path="/csv/part-1")),
    ]
    try:
        frame = (
            spark.read.format("splitsource.files")
            .option("format", "csv")
            .option("header", "true")
            .option("storageOptions", through(proxy, s3))
            .schema(SCHEMA)
            .load(f"{root}/csv")
        )
        assert ids(frame) == [row["id"] for row in ROWS]
    finally:
        proxy.clear()
    assert [fault.hits for fault in faults] == [2, 2]


@pytest.mark.parametrize("where", ["listing", "reading"])
def test_access_denied_fails_fast_naming_the_path_never_the_secret(
    spark: SparkSession, s3: S3Server, proxy: FaultyProxy, bucket: str, where: str
) -> None:
    root = f"s3://{bucket}/lake"
    write_every_format(s3, root)
    if where == "listing":
        proxy.inject(Fault(403, "AccessDenied", count=100, method="GET", query="list-type"))
    else:
        proxy.inject(Fault(403, "AccessDenied", count=100, method="GET", path="/csv/part-"))
    try:
        frame = (
            spark.read.format("splitsource.files")
            .option("format", "csv")
            .option("header", "true")
            .option("storageOptions", through(proxy, s3))
            .option("ignoreCorruptFiles", "true")  # not corrupt: never skipped
            .schema(SCHEMA)
            .load(f"{root}/csv")
        )
        with pytest.raises(Exception) as raised:
            frame.collect()
    finally:
        proxy.clear()
    message = str(raised.value)
    assert f"{bucket}/lake/csv" in message
    expected = "Cannot list" if where == "listing" else "No permission to read"
    assert expected in message and "read access" in message
    assert SECRET_KEY not in message


def test_a_missing_bucket_fails_naming_it(spark: SparkSession, s3: S3Server) -> None:
    frame = (
        spark.read.format("splitsource.files")
        .option("format", "json")
        .option("storageOptions", json.dumps(s3.storage_options()))
        .schema(SCHEMA)
    )
    with pytest.raises(Exception, match="no-such-bucket-here/data"):
        frame.load("s3://no-such-bucket-here/data").collect()


@pytest.mark.parametrize("clean", ["delete", "archive"])
def test_clean_source_on_s3_survives_a_failed_delete_without_loss_or_duplicates(
    spark: SparkSession,
    s3: S3Server,
    proxy: FaultyProxy,
    bucket: str,
    tmp_path: Path,
    clean: str,
) -> None:
    """On S3 an archive is a copy then a delete. Deletes fail during the first run (as a
    crash between the two would leave it): the files are cleaned at the next commit, read
    once, archived once."""
    fs = s3.fs()
    write_json_objects(s3, f"{bucket}/in", range(0, 150, 50))
    denied = 10**6  # every delete of the first run; not retried, unlike throttling
    deletes = proxy.inject(Fault(403, "AccessDenied", denied, method="DELETE", path="/in/"))
    posts = proxy.inject(Fault(403, "AccessDenied", denied, method="POST", query="delete"))

    stream = json_stream(
        spark,
        f"s3://{bucket}/in",
        tmp_path,
        storageOptions=through(proxy, s3),
        stateLocation=str(tmp_path / "state"),
        maxFilesPerTrigger=1,
        cleanSource=clean,
        sourceArchiveDir=f"s3://{bucket}/archive",
    )

    try:
        run_available_now(stream)
        assert deletes.hits + posts.hits > 0, "no delete was attempted while they failed"
        assert fs.ls(f"{bucket}/in"), "every delete failed: the files must still be there"
    finally:
        proxy.clear()
    # Deletes work again. The next commit (of one more file) cleans what was left behind,
    # which is not read again.
    fs.pipe(f"{bucket}/in/part-00150.json", b'{"id": 150, "name": "x"}\n')
    run_available_now(stream)

    assert ids(spark.read.parquet(str(tmp_path / "sink"))) == list(range(151))
    assert not fs.exists(f"{bucket}/in") or not fs.ls(f"{bucket}/in", refresh=True)
    archived = fs.find(f"{bucket}/archive") if fs.exists(f"{bucket}/archive") else []
    expected = [f"{bucket}/archive/{bucket}/in/part-{n:05d}.json" for n in (0, 50, 100, 150)]
    assert sorted(archived) == (expected if clean == "archive" else [])


def test_latest_first_and_max_file_age_go_by_last_modified_on_s3(
    spark: SparkSession, s3: S3Server, bucket: str, tmp_path: Path
) -> None:
    """S3 keeps no mtime one can set: objects are written seconds apart instead, and their
    ``LastModified`` orders them. part-0 is older than the newest by more than maxFileAge."""
    fs = s3.fs()
    for number in range(4):
        time.sleep(5.0 if number == 1 else 1.1 if number else 0)
        body = "".join(json.dumps({"id": number * 10 + i}) + "\n" for i in range(10))
        fs.pipe(f"{bucket}/in/part-{number}.json", body.encode())
    batches: dict[int, list[int]] = {}

    def keep(batch: DataFrame, batch_id: int) -> None:
        found = sorted({row.id // 10 for row in batch.select("id").collect()})
        if found:
            batches[batch_id] = found

    query = (
        spark.readStream.format("splitsource.files")
        .option("format", "json")
        .option("storageOptions", json.dumps(s3.storage_options()))
        .option("stateLocation", f"s3://{bucket}/_state")
        .option("latestFirst", "true")
        .option("maxFilesPerTrigger", 2)
        .option("maxFileAge", "4s")
        .schema("id bigint")
        .load(f"s3://{bucket}/in")
        .writeStream.foreachBatch(keep)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(180)
    assert [batches[key] for key in sorted(batches)] == [[2, 3], [1]]


def test_an_object_overwritten_after_it_was_listed_fails_naming_it(
    s3: S3Server, bucket: str
) -> None:
    """The same check as on disk: size or LastModified changed since the listing."""
    from readers import FetcherSettings, SplitFetcher
    from sources.files.source import FileSource
    from sources.spark.datasource import plan_bounded
    from sources.spark.partitions import arrow_schema

    fs = s3.fs()
    fs.pipe(f"{bucket}/in/a.json", b'{"id": 1}\n')
    source, _ = FileSource.from_spark_options(
        {
            "path": f"s3://{bucket}/in",
            "format": "json",
            "storageOptions": json.dumps(s3.storage_options()),
        }
    )
    splits = plan_bounded(source)
    time.sleep(1.1)  # LastModified has whole seconds
    fs.pipe(f"{bucket}/in/a.json", b'{"id": 1}\n{"id": 2}\n')
    schema = arrow_schema(source.schema())
    fetcher = SplitFetcher(lambda: source.create_reader(schema), splits, schema, FetcherSettings())
    with pytest.raises(Exception, match=f"File '{bucket}/in/a.json' changed after it was listed"):
        list(fetcher)


def test_throttled_state_writes_are_retried_and_the_stream_goes_on(
    spark: SparkSession, s3: S3Server, proxy: FaultyProxy, bucket: str, tmp_path: Path
) -> None:
    write_json_objects(s3, f"{bucket}/in", (0, 50))
    writes = proxy.inject(Fault(503, "SlowDown", count=2, method="PUT", path="/_state/"))
    try:
        options = {"storageOptions": through(proxy, s3), "stateLocation": f"s3://{bucket}/_state"}
        query = json_stream(spark, f"s3://{bucket}/in", tmp_path, **options).start()
        query.processAllAvailable()
        stop_gracefully(query, f"s3://{bucket}/_state", 120, json.loads(through(proxy, s3)))
    finally:
        proxy.clear()
    assert writes.hits == 2
    assert ids(spark.read.parquet(str(tmp_path / "sink"))) == list(range(100))
