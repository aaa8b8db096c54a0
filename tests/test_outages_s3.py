"""A splitsource.files stream on S3 rides out its endpoint gone for 60 s while a writer adds
files throughout: every record once, the query never stopped by a person (issue 52)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from helpers.s3_faults import FaultyProxy

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from helpers.s3_server import S3Server

pytestmark = [pytest.mark.spark, pytest.mark.s3, pytest.mark.slow]

OUTAGE_SECONDS = 60
ROWS_PER_FILE = 50


class FileWriter(threading.Thread):
    """Writes a JSON Lines file of the next ``ROWS_PER_FILE`` ids every ``pause`` seconds,
    straight to the S3 server (not through the proxy that goes down)."""

    def __init__(self, s3: S3Server, folder: str, pause: float = 0.3) -> None:
        super().__init__(daemon=True)
        self.fs = s3.fs()
        self.folder = folder
        self.pause = pause
        self.files = 0
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(self.pause):
            first = self.files * ROWS_PER_FILE
            lines = "".join(
                json.dumps({"id": i}) + "\n" for i in range(first, first + ROWS_PER_FILE)
            )
            self.fs.pipe(f"{self.folder}/part-{self.files:05d}.json", lines.encode())
            self.files += 1


@pytest.fixture
def proxy(s3: S3Server) -> Iterator[FaultyProxy]:
    with FaultyProxy(s3.port) as faulty:
        yield faulty


def test_a_file_stream_rides_out_its_s3_endpoint_gone_for_60_s(
    spark: SparkSession, s3: S3Server, proxy: FaultyProxy, bucket: str, tmp_path: Path
) -> None:
    storage = json.dumps(dict(s3.storage_options(), endpoint_url=proxy.endpoint))
    writer = FileWriter(s3, f"{bucket}/in")
    writer.start()
    query = (
        spark.readStream.format("splitsource.files")
        .option("format", "json")
        .option("storageOptions", storage)
        .option("stateLocation", f"s3://{bucket}/_state")
        .option("discoveryInterval", "1s")
        .schema("id bigint")
        .load(f"s3://{bucket}/in")
        .writeStream.format("parquet")
        .option("path", str(tmp_path / "sink"))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(processingTime="500 milliseconds")
        .start()
    )
    try:
        deadline = time.monotonic() + 120
        while len([p for p in query.recentProgress if p["numInputRows"]]) < 3:
            assert query.exception() is None, query.exception()
            assert time.monotonic() < deadline, "the stream read nothing within 120 s"
            time.sleep(0.2)
        proxy.go_down()
        down_since = time.monotonic()
        try:
            while time.monotonic() - down_since < OUTAGE_SECONDS:
                assert query.isActive and query.exception() is None, query.exception()
                time.sleep(1)
        finally:
            proxy.come_back()
        time.sleep(3)
        writer.stopped.set()
        writer.join(30)
        expected = list(range(writer.files * ROWS_PER_FILE))
        deadline = time.monotonic() + 180
        while True:
            assert query.isActive and query.exception() is None, query.exception()
            got = sorted(row.id for row in spark.read.parquet(str(tmp_path / "sink")).collect())
            if len(got) >= len(expected) or time.monotonic() > deadline:
                break
            time.sleep(1)
    finally:
        writer.stopped.set()
        query.stop()
    assert got == expected
