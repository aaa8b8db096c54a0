"""``splitsource.hybrid``: a topic's archive in files, then the topic itself from Kafka.

History sits in files (a topic archived as Parquet or JSON, with ``topic``,
``partition``, ``offset`` and ``timestamp`` columns), live data in Kafka; this
source reads both as one stream, with one checkpoint. The file source takes the
options under ``archive.``, the Kafka source those under ``live.``; ``handoff``
says where Kafka starts (:mod:`enumerators.hybrid.archive_then_kafka`). Rows have the
archive's columns; Kafka's columns of the same names are cast to them. An empty
archive (no files yet) has Kafka's columns, unless ``.schema(...)`` says otherwise,
and the stream switches to Kafka at once. See docs/hybrid.md.

Example::

    (spark.readStream.format("splitsource.hybrid")
        .option("archive.format", "parquet").option("archive.path", "s3://bucket/events")
        .option("live.kafka.bootstrap.servers", "127.0.0.1:9092")
        .option("live.subscribe", "events")
        .option("stateLocation", "s3://bucket/state/events").load())
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import pyarrow as pa
from pyspark.sql.types import StructType

from enumerators.base import ReadMode
from enumerators.hybrid.archive_then_kafka import HANDOFFS, OFFSET_COLUMNS, kafka_start
from enumerators.hybrid.enumerator import SwitchContext
from sources.errors import InvalidOptionError
from sources.files.source import FileSource
from sources.hybrid.source import HybridSource, HybridStage
from sources.kafka.source import KafkaSource
from sources.options import Option, Options

__all__ = ["ArchiveThenKafkaSource"]

ARCHIVE_DEFAULTS = {"maxFileAge": "3650000d"}
"""The archive is read whole, whatever the age of its files (a file stream's ``maxFileAge``
would leave files older than a week out)."""

_TIMESTAMP_STARTS = ("startingTimestamp", "startingOffsetsByTimestamp")


class ArchiveThenKafkaSource(HybridSource):
    """The archive under ``archive.*`` (files), then Kafka under ``live.*``; see the module."""

    name = "hybrid"
    stages = (
        HybridStage(
            FileSource,
            "archive.",
            defaults=ARCHIVE_DEFAULTS,
            doc="such as `archive.format`, `archive.path`, `archive.storageOptions` "
            "([files.md](files.md)); every archive file is read, whatever its age",
        ),
        HybridStage(
            KafkaSource,
            "live.",
            project=True,
            doc="such as `live.kafka.bootstrap.servers`, `live.subscribe`, "
            "`live.startingOffsets` (for the partitions the archive lacks), "
            "`live.failOnDataLoss` ([kafka.md](kafka.md))",
        ),
    )
    extra_options: ClassVar = (
        Option.choice(
            "handoff",
            "where Kafka starts: offsets (one past the archive's last offset per partition) "
            "or timestamp (at the archive's last timestamp)",
            HANDOFFS,
            default="offsets",
        ).listed("where Kafka starts: `offsets` or `timestamp` (see below)"),
    )

    handoff: str = "offsets"

    def schema_when_unknown(self, index: int) -> StructType | str | None:
        """An empty archive has Kafka's columns (``key``, ``value``, ``topic``, ...)."""
        return self.sources[1].schema() if index == 0 else None

    def configure(self, options: Options) -> None:
        self.handoff = options["handoff"]
        columns = self.stage_schema(0).names
        needed = OFFSET_COLUMNS if self.handoff == "offsets" else ("timestamp",)
        missing = [name for name in needed if name not in columns]
        if missing:
            raise InvalidOptionError(
                self.format_name(),
                "handoff",
                f"{self.handoff} needs the archive's columns {', '.join(needed)}, but the "
                f"archive at {self.stage_options[0].get('path', 'archive.path')} has no "
                f"{', '.join(missing)} (its columns: {', '.join(columns)}); "
                + (
                    "use handoff=timestamp if it has a timestamp column"
                    if self.handoff == "offsets"
                    else "use handoff=offsets if it has topic, partition and offset"
                ),
            )
        archive = self.stage_schema(0)
        topic = archive.field("topic").type if "topic" in archive.names else pa.string()
        textual = pa.types.is_string(topic) or pa.types.is_large_string(topic)
        if self.handoff == "offsets" and not textual:
            raise InvalidOptionError(
                self.format_name(),
                "handoff",
                f"offsets matches the archive's topic column to Kafka's topic names, but the "
                f"archive at {self.stage_options[0].get('path', 'archive.path')} has it as "
                f"{str(topic).upper()}; write the topic as a string (CAST(topic AS STRING)), "
                "or use handoff=timestamp",
            )
        given = {key.lower() for key in self.stage_options[1]}
        clash = [name for name in _TIMESTAMP_STARTS if name.lower() in given]
        if self.handoff == "offsets" and clash:
            raise InvalidOptionError(
                self.format_name(),
                f"live.{clash[0]}",
                "cannot be combined with handoff=offsets: the archive says where each of "
                "its partitions starts; use live.startingOffsets for the partitions it lacks",
            )

    def stage_start(self, index: int, context: SwitchContext[Any]) -> Mapping[str, str]:
        mode: ReadMode = context.mode
        archive = context.previous
        assert isinstance(archive, FileSource)
        return kafka_start(
            self.handoff,
            archive,
            self.stage_schema(0),
            context.final_state,
            context.next_source,
            mode,
        )
