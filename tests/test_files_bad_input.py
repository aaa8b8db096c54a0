"""Bad input for splitsource.files through real Spark: each error names the file, each mode.

With ``mode=FAILFAST`` (PERMISSIVE is the default, as in Spark) and the other
defaults, the error a user sees names the file (and the line or row group) and
says what to do. ``mode``, ``ignoreMissingFiles`` and ``ignoreCorruptFiles``
turn each failure into a counted skip.
"""

from __future__ import annotations

import gzip
import json
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fsspec.implementations.local import LocalFileSystem

from helpers.locked_files import LockedFilesSource
from readers.files.formats import FormatOptions, read_range
from sources.errors import InvalidOptionError
from sources.files.source import FileSource
from sources.options import parse_options
from sources.spark import register
from sources.testing.reading import read_all

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

pytestmark = pytest.mark.spark

SCHEMA = "id bigint, name string"


@pytest.fixture(scope="module", autouse=True)
def registered(spark: SparkSession) -> None:
    register(spark, FileSource, LockedFilesSource)


def read(spark: SparkSession, fmt: str, path: Path, schema: str = SCHEMA, **options: Any) -> Any:
    reader = spark.read.format("splitsource.files").option("format", fmt).schema(schema)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load(str(path))


def ids(df: DataFrame) -> list[Any]:
    return sorted(row[0] for row in df.select("id").collect())


def write_parquet(path: Path, first: int, rows: int) -> None:
    pq.write_table(
        pa.table(
            {
                "id": pa.array(range(first, first + rows), pa.int64()),
                "name": [f"n{i}" for i in range(first, first + rows)],
            }
        ),
        path,
    )


def test_corrupt_parquet_names_the_file_or_is_skipped(spark: SparkSession, tmp_path: Path) -> None:
    write_parquet(tmp_path / "good.parquet", 0, 10)
    damaged = (tmp_path / "good.parquet").read_bytes()
    (tmp_path / "bad.parquet").write_bytes(damaged[: len(damaged) // 2])

    with pytest.raises(Exception, match=r"Parquet file '[^']*bad\.parquet'.*ignoreCorruptFiles"):
        read(spark, "parquet", tmp_path).count()

    assert ids(read(spark, "parquet", tmp_path, ignoreCorruptFiles="true")) == list(range(10))


def test_truncated_gzip_names_the_file_and_keeps_earlier_rows_when_ignored(
    spark: SparkSession, tmp_path: Path
) -> None:
    # ~13 MB of lines: the damage lies past the first decoded block (8 MiB), whose rows are kept.
    lines = "".join(f'{{"id": {i}, "name": "n{i}"}}\n' for i in range(400_000))
    packed = gzip.compress(lines.encode())
    (tmp_path / "cut.jsonl.gz").write_bytes(packed[: len(packed) * 3 // 4])

    with pytest.raises(Exception, match=r"gzip-compressed file '[^']*cut\.jsonl\.gz'.*truncated"):
        read(spark, "json", tmp_path).count()

    kept = ids(read(spark, "json", tmp_path, ignoreCorruptFiles="true"))
    assert 0 < len(kept) < 400_000
    assert kept == list(range(len(kept)))  # a prefix of the file, as Spark keeps


MALFORMED = {
    "json": '{"id": 1, "name": "a"}\n{"id": "two", "name": "b"}\nnope\n{"id": 4, "name": "d"}\n',
    "csv": "1,a\n2\nthree,c\n4,d\n",
}
"""Lines 1 and 4 are well formed; 2 has a value of the wrong type (json) or too few (csv)."""


@pytest.mark.parametrize("fmt", ["json", "csv"])
def test_malformed_lines_fail_fast_naming_file_and_line(
    spark: SparkSession, tmp_path: Path, fmt: str
) -> None:
    (tmp_path / f"rows.{fmt}").write_text(MALFORMED[fmt])

    with pytest.raises(Exception, match=rf"{fmt} file '[^']*rows\.{fmt}' at line 2 .*mode="):
        read(spark, fmt, tmp_path, mode="FAILFAST").collect()


@pytest.mark.parametrize("fmt", ["json", "csv"])
@pytest.mark.parametrize("mode", ["PERMISSIVE", "DROPMALFORMED"])
def test_malformed_lines_give_sparks_rows_in_each_mode(
    spark: SparkSession, tmp_path: Path, fmt: str, mode: str
) -> None:
    (tmp_path / f"rows.{fmt}").write_text(MALFORMED[fmt])
    schema = f"{SCHEMA}, bad string"
    options = {"mode": mode, "columnNameOfCorruptRecord": "bad"}

    ours = read(spark, fmt, tmp_path, schema, **options)
    theirs = spark.read.schema(schema).options(**options).format(fmt).load(str(tmp_path))

    assert sorted(ours.collect(), key=str) == sorted(theirs.collect(), key=str)
    assert ours.count() == (4 if mode == "PERMISSIVE" else 2)


def test_permissive_needs_a_string_corrupt_record_column(
    spark: SparkSession, tmp_path: Path
) -> None:
    (tmp_path / "rows.csv").write_text("1,a\n")

    with pytest.raises(Exception, match=r"columnNameOfCorruptRecord.*must be a nullable string"):
        read(spark, "csv", tmp_path, f"{SCHEMA}, _corrupt_record int", mode="PERMISSIVE").count()


def test_a_column_of_the_wrong_type_names_file_and_column(
    spark: SparkSession, tmp_path: Path
) -> None:
    write_parquet(tmp_path / "data.parquet", 0, 5)

    with pytest.raises(Exception, match=r"'[^']*data\.parquet'.*column 'name' holds string"):
        read(spark, "parquet", tmp_path, "id bigint, name int").collect()


def test_an_unreadable_directory_is_named(spark: SparkSession, tmp_path: Path) -> None:
    (tmp_path / "locked").mkdir()
    (tmp_path / "locked" / "rows.csv").write_text("1,a\n")
    reader = spark.read.format("splitsource.lockedfiles").option("format", "csv").schema(SCHEMA)

    with pytest.raises(Exception, match=r"Cannot list '[^']*locked'.*Permission denied"):
        reader.load(str(tmp_path / "locked")).count()


def test_a_path_that_does_not_exist_is_named(spark: SparkSession, tmp_path: Path) -> None:
    with pytest.raises(Exception, match=r"Path '[^']*missing-dir' does not exist"):
        read(spark, "csv", tmp_path / "missing-dir").count()


def replay_last_batch(
    spark: SparkSession, tmp_path: Path, change: Any, **options: Any
) -> list[int]:
    """Stream two files, one per batch; undo the last commit, ``change`` the file it read,
    and run again: the rows the replayed batch read."""
    incoming = tmp_path / "in"
    incoming.mkdir(parents=True)
    write_parquet(incoming / "f-0.parquet", 0, 10)
    write_parquet(incoming / "f-1.parquet", 10, 10)
    checkpoint = tmp_path / "checkpoint"
    replayed: list[int] = []

    def run(collect: bool) -> None:
        reader = (
            spark.readStream.format("splitsource.files")
            .option("format", "parquet")
            .option("maxFilesPerTrigger", 1)
            .option("stateLocation", str(tmp_path / "state"))
            .schema(SCHEMA)
        )
        for key, value in options.items():
            reader = reader.option(key, value)

        def keep(batch: DataFrame, batch_id: int) -> None:
            if collect:
                replayed.extend(row.id for row in batch.collect())

        query = (
            reader.load(str(incoming))
            .writeStream.foreachBatch(keep)
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(300)

    run(collect=False)
    # As if the driver died before committing batch 1 (Hadoop's checksum file goes too).
    for name in ("1", ".1.crc"):
        (checkpoint / "commits" / name).unlink(missing_ok=True)
    change(incoming / "f-1.parquet")
    run(collect=True)
    return sorted(replayed)


@pytest.mark.slow
def test_a_file_deleted_before_its_batch_is_replayed(spark: SparkSession, tmp_path: Path) -> None:
    with pytest.raises(Exception, match=r"'[^']*f-1\.parquet' does not exist any more"):
        replay_last_batch(spark, tmp_path / "strict", Path.unlink)

    assert (
        replay_last_batch(spark, tmp_path / "lenient", Path.unlink, ignoreMissingFiles=True) == []
    )


def replace(path: Path) -> None:
    write_parquet(path, 100, 30)


def test_a_file_replaced_after_it_was_listed(spark: SparkSession, tmp_path: Path) -> None:
    with pytest.raises(Exception, match=r"'[^']*f-1\.parquet' changed after it was listed"):
        replay_last_batch(spark, tmp_path / "strict", replace)

    assert replay_last_batch(spark, tmp_path / "lenient", replace, ignoreCorruptFiles=True) == []


def test_dropped_lines_are_counted_in_a_warning_naming_the_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "rows.json"
    path.write_text(MALFORMED["json"])
    options = FormatOptions("json", pa.schema([("id", pa.int64())]), mode="DROPMALFORMED")

    with caplog.at_level(logging.WARNING, logger="splitsource.files"):
        batches = list(read_range(LocalFileSystem(), str(path), 0, path.stat().st_size, options))

    assert sum(batch.num_rows for batch in batches) == 2
    assert f"dropped 2 malformed line(s) of '{path}'" in caplog.text
    assert "the first at line 2" in caplog.text


def test_malformed_multiline_records_are_counted_from_their_first_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "rows.csv"
    path.write_bytes(b'id,name\n1,"a\nb"\n2\n3,"c\nd",extra\n4,e\n')
    schema = pa.schema([("id", pa.int64()), ("name", pa.string())])
    options = FormatOptions("csv", schema, header=True, multi_line=True, mode="DROPMALFORMED")

    with caplog.at_level(logging.WARNING, logger="splitsource.files"):
        batches = list(read_range(LocalFileSystem(), str(path), 0, path.stat().st_size, options))

    assert [row["id"] for batch in batches for row in batch.to_pylist()] == [1, 4]
    assert f"dropped 2 malformed line(s) of '{path}'" in caplog.text
    assert "the first at line 4" in caplog.text


def test_storage_options_reach_the_filesystem_and_never_the_checkpoint(
    spark: SparkSession, tmp_path: Path
) -> None:
    secret = "s3cr3t-7f1d2c"
    storage = json.dumps({"auto_mkdir": True, "token": secret})
    source = FileSource.from_options(
        parse_options(
            "splitsource.files",
            FileSource.options,
            {"path": str(tmp_path), "format": "csv", "storageOptions": storage},
        )
    )
    assert source.storage.fs.auto_mkdir is True
    with pytest.raises(InvalidOptionError, match="value not shown") as bad:
        parse_options("splitsource.files", FileSource.options, {"storageOptions": secret})
    assert secret not in str(bad.value)

    incoming = tmp_path / "in"
    incoming.mkdir()
    write_parquet(incoming / "f-0.parquet", 0, 10)
    query = (
        spark.readStream.format("splitsource.files")
        .option("format", "parquet")
        .option("storageOptions", storage)
        .option("stateLocation", str(tmp_path / "state"))
        .schema(SCHEMA)
        .load(str(incoming))
        .writeStream.format("parquet")
        .option("path", str(tmp_path / "out"))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(300)

    assert spark.read.parquet(str(tmp_path / "out")).count() == 10
    for kept in (tmp_path / "checkpoint", tmp_path / "state"):
        for file in kept.rglob("*"):
            assert not file.is_file() or secret.encode() not in file.read_bytes(), file


@pytest.mark.parametrize(("quote", "kept"), [('"', "b"), ("", '"b"')])
def test_permissive_keeps_a_bad_lines_other_values_with_and_without_quoting(
    tmp_path: Path, quote: str, kept: str
) -> None:
    path = tmp_path / "rows.csv"
    path.write_bytes(b'1;a\nx;"b"\n')
    schema = pa.schema([("id", pa.int64()), ("name", pa.string())])
    options = FormatOptions("csv", schema, sep=";", quote=quote, mode="PERMISSIVE")

    batches = read_range(LocalFileSystem(), str(path), 0, path.stat().st_size, options)

    rows = pa.Table.from_batches(list(batches), schema=schema).to_pylist()
    assert rows == [{"id": 1, "name": "a"}, {"id": None, "name": kept}]


def test_files_reached_through_symbolic_links_are_read_as_spark_reads_them(
    spark: SparkSession, tmp_path: Path
) -> None:
    data, linked = tmp_path / "data", tmp_path / "linked"
    data.mkdir()
    linked.mkdir()
    write_parquet(data / "f-0.parquet", 0, 30)
    (linked / "f-0.parquet").symlink_to(data / "f-0.parquet")
    os.utime(linked / "f-0.parquet", (1, 1), follow_symlinks=False)  # link older than its file
    ours = read_all(FileSource, {"format": "parquet", "path": linked})
    theirs = spark.read.parquet(str(linked)).toArrow()

    assert ours.sort_by("id").equals(theirs.sort_by("id"))
    assert ours.num_rows == 30
