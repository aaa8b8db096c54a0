"""Positions wider than 64 bits (a Redis entry ID packed as ``ms << 64 | seq``) go through
Spark's offset log and a restart unchanged."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import pyarrow as pa
import pytest

from enumerators import EnumeratorContext, StaticSplitEnumerator
from readers import RecordsBySplit, SplitReader, SplitsAddition
from sources import Option, Options, SimpleVersionedSerializer, Source, SourceSplit
from sources.capabilities import SupportsCountedRecords
from sources.spark import register
from sources.split import Boundedness

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

BASE = 1_700_000_000_000 << 64
"""The first position: a millisecond timestamp in the high 64 bits."""


@dataclass(frozen=True)
class WideSplit(SourceSplit):
    """Records ``start - BASE`` .. ``end - BASE - 1`` at positions ``[start, end)``."""

    index: int
    start: int
    end: int

    @property
    def split_id(self) -> str:
        return str(self.index)

    def start_position(self) -> int:
        return self.start

    def end_position(self) -> int:
        return self.end

    def with_range(self, start: int, end: int) -> WideSplit:
        return WideSplit(self.index, start, end)


class WideSplits(SimpleVersionedSerializer[list[WideSplit]]):
    @property
    def version(self) -> int:
        return 1

    def serialize(self, obj: list[WideSplit]) -> bytes:
        return json.dumps([[s.index, s.start, s.end] for s in obj]).encode()

    def deserialize(self, version: int, data: bytes) -> list[WideSplit]:
        return [WideSplit(*fields) for fields in json.loads(data)]


class WideSplitSerializer(SimpleVersionedSerializer[WideSplit]):
    @property
    def version(self) -> int:
        return 1

    def serialize(self, obj: WideSplit) -> bytes:
        return WideSplits().serialize([obj])

    def deserialize(self, version: int, data: bytes) -> WideSplit:
        (split,) = WideSplits().deserialize(version, data)
        return split


class WideReader(SplitReader[WideSplit]):
    def __init__(self) -> None:
        self.splits: list[WideSplit] = []

    def handle_splits_changes(self, change: SplitsAddition[WideSplit]) -> None:
        self.splits.extend(change.splits)

    def fetch(self, timeout: float) -> RecordsBySplit:
        if not self.splits:
            return RecordsBySplit()
        split = self.splits.pop(0)
        values = pa.array(range(split.start - BASE, split.end - BASE), pa.int64())
        batch = pa.RecordBatch.from_arrays([values], names=["value"])
        return RecordsBySplit({split.split_id: [batch]}, frozenset({split.split_id}))

    def wakeup(self) -> None:
        """Never blocks."""


class WideSource(SupportsCountedRecords[WideSplit], Source[WideSplit, list[WideSplit]]):
    """Two splits of ``rows`` records each, at positions from ``BASE`` on."""

    name = "wide"
    options: ClassVar = (Option.integer("rows", "records per split", default=500, minimum=1),)
    supported_boundedness: ClassVar = frozenset(Boundedness)

    def __init__(self, rows: int) -> None:
        self.rows = rows

    @classmethod
    def from_options(cls, options: Options) -> WideSource:
        return cls(options["rows"])

    def schema(self) -> str:
        return "value BIGINT NOT NULL"

    def create_enumerator(self, context: EnumeratorContext) -> StaticSplitEnumerator[WideSplit]:
        first, second = BASE, BASE + self.rows
        return StaticSplitEnumerator(
            [WideSplit(0, first, second), WideSplit(1, second, second + self.rows)]
        )

    def restore_enumerator(
        self, context: EnumeratorContext, state: list[WideSplit]
    ) -> StaticSplitEnumerator[WideSplit]:
        return StaticSplitEnumerator(state)

    def create_reader(self, schema: pa.Schema) -> WideReader:
        return WideReader()

    def split_serializer(self) -> WideSplitSerializer:
        return WideSplitSerializer()

    def enumerator_state_serializer(self) -> WideSplits:
        return WideSplits()


@pytest.mark.spark
def test_positions_of_128_bits_survive_the_offset_log_and_a_restart(
    spark: SparkSession, tmp_path: Path
) -> None:
    register(spark, WideSource)

    def start(**trigger: Any) -> Any:
        return (
            spark.readStream.format("splitsource.wide")
            .option("maxRecordsPerTrigger", 100)
            .load()
            .writeStream.format("parquet")
            .option("path", str(tmp_path / "out"))
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(**trigger)
            .start()
        )

    first = start(processingTime="100 milliseconds")
    deadline = time.monotonic() + 120
    while sum(p["numInputRows"] > 0 for p in first.recentProgress) < 3:
        assert time.monotonic() < deadline, "no three batches within 120 s"
        time.sleep(0.1)
    first.stop()
    positions = json.loads(first.recentProgress[-1]["sources"][0]["endOffset"])["positions"]
    start(availableNow=True).awaitTermination(120)  # goes on from the logged offsets

    values = [row.value for row in spark.read.parquet(str(tmp_path / "out")).collect()]
    assert sorted(values) == list(range(1_000))
    assert min(positions.values()) > 1 << 64
