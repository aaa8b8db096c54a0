"""Topic archives for the hybrid tests: a topic's records, read back from the real broker,
written as Parquet files with ``topic``, ``partition``, ``offset`` and ``timestamp``."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from sources.kafka.source import KafkaSource
from sources.testing import read_all

if TYPE_CHECKING:
    from helpers.kafka_broker import KafkaBroker

COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp")
"""The archive's columns: Kafka's less ``timestampType``, ``value`` as text."""


def topic_records(broker: KafkaBroker, topic: str) -> pa.Table:
    """Every record of ``topic`` as the archive stores it."""
    table = read_all(KafkaSource, {"kafka.bootstrap.servers": broker.bootstrap, "subscribe": topic})
    table = table.select(list(COLUMNS))
    return table.set_column(1, "value", table["value"].cast(pa.string()))


def archive(
    broker: KafkaBroker, topic: str, directory: Path, upto: Mapping[int, int], name: str = "part"
) -> pa.Table:
    """Archive the records of ``topic`` below offset ``upto[p]`` of each partition ``p``, one
    file per partition named ``<name>-<p>.parquet``; returns what was archived."""
    directory.mkdir(parents=True, exist_ok=True)
    records = topic_records(broker, topic)
    written = []
    for partition, end in sorted(upto.items()):
        keep = pc.and_(pc.equal(records["partition"], partition), pc.less(records["offset"], end))
        rows = records.filter(keep)
        pq.write_table(rows, directory / f"{name}-{partition}.parquet")
        written.append(rows)
    return pa.concat_tables(written)


def archive_in_files(broker: KafkaBroker, topic: str, directory: Path, files: int) -> int:
    """Archive every record ``topic`` holds now in ``files`` Parquet files of about equal
    size (by partition, then offset), appearing whole; returns how many records."""
    directory.mkdir(parents=True, exist_ok=True)
    records = topic_records(broker, topic).sort_by(
        [("partition", "ascending"), ("offset", "ascending")]
    )
    bounds = [records.num_rows * i // files for i in range(files + 1)]
    for index in range(files):
        staged = directory.parent / f".archive-{index:03d}.parquet"
        pq.write_table(records.slice(bounds[index], bounds[index + 1] - bounds[index]), staged)
        staged.rename(directory / f"archive-{index:03d}.parquet")
    return records.num_rows
