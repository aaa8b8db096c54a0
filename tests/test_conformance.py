"""The packaged sources pass the author kit's conformance suite (:mod:`sources.testing`).

One suite subclass per source, each with its context: numbers and rate make their own
data from options, files and Kafka are written into (parquet files, topic partitions).
The golden values and hypothesis strategies are those of the sources' own tests.
"""

from __future__ import annotations

import uuid
from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

import test_files_state
import test_kafka_options
import test_offsets
import test_serialization
from enumerators.rate.enumerator import RateState
from sources.files.source import FileSource
from sources.kafka.source import KafkaSource
from sources.numbers.source import NumberSequenceSource
from sources.rate.source import RateSource
from sources.rate.splits import RateSplit
from sources.testing.conformance import Case, ConformanceContext, SourceConformanceSuite

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from helpers.kafka_broker import KafkaBroker

GOLDEN = Path(__file__).parent / "golden"
ROWS = 1_000
"""Records per split, and per append."""


class ProjectSuite(SourceConformanceSuite):
    """The suite in this project's session (``spark``, with the packaged sources registered)."""

    @pytest.fixture
    def spark_session(self, spark: SparkSession) -> SparkSession:
        return spark


class ValueRows(ConformanceContext):
    """Sources whose rows compare by one ``value`` column; counts the values written."""

    def __init__(self, directory: Path) -> None:
        super().__init__(directory)
        self.values: list[int] = []

    def take(self, count: int) -> list[int]:
        """The next ``count`` values, remembered as expected."""
        first = len(self.values)
        self.values.extend(range(first, first + count))
        return self.values[first:]

    def expected_rows(self) -> Iterable[Hashable]:
        return [(value,) for value in self.values]

    def row(self, record: Mapping[str, Any]) -> Hashable:
        value = record["value"]
        return (int(value) if isinstance(value, bytes) else value,)


# --- numbers ------------------------------------------------------------------------


class NumbersContext(ValueRows):
    source_class = NumberSequenceSource
    stream_options: ClassVar = {"maxRecordsPerTrigger": 1_000}
    golden_directory = GOLDEN

    def create_input(self, splits: int) -> Mapping[str, Any]:
        self.values = []
        return {"to": len(self.take(ROWS * splits)) - 1, "splits": splits}

    def splits(self) -> SearchStrategy[Any]:
        return test_serialization.splits

    def states(self) -> SearchStrategy[Any]:
        return test_serialization.states

    def golden_split(self, version: int) -> Any:
        return test_serialization.GOLDEN_SPLIT

    def golden_state(self, version: int) -> Any:
        return test_serialization.GOLDEN_STATE


class TestNumbers(ProjectSuite):
    @pytest.fixture
    def context(self, tmp_path: Path) -> NumbersContext:
        return NumbersContext(tmp_path)


# --- rate ---------------------------------------------------------------------------


class RateContext(ConformanceContext):
    """Rows appear with the clock: what a stream read is checked for gaps and repeats."""

    source_class = RateSource
    # Slow rows and roomy batches: an AvailableNow run catches up in a few batches.
    stream_options: ClassVar = {"maxRecordsPerTrigger": 1_000}
    golden_directory = GOLDEN

    def create_input(self, splits: int) -> Mapping[str, Any]:
        self.count = splits
        return {"splits": splits, "rowsPerSecond": 100}

    def check_rows(self, rows: Sequence[Hashable]) -> None:
        """Split ``i`` of ``n`` holds ``p * n + i`` at position ``p``: each split's positions
        read must be ``0 .. k``, each once."""
        values = sorted(row[0] for row in rows)  # type: ignore[index]
        assert len(set(values)) == len(values), "a row was read twice"
        for split in range(self.count):
            positions = [v // self.count for v in values if v % self.count == split]
            assert positions == list(range(len(positions))), f"split {split} has gaps"

    def row(self, record: Mapping[str, Any]) -> Hashable:
        return (record["value"],)

    def splits(self) -> SearchStrategy[Any]:
        return test_offsets.rate_splits

    def states(self) -> SearchStrategy[Any]:
        pending = st.lists(test_offsets.rate_splits, max_size=5).map(tuple)
        return st.builds(RateState, st.booleans(), pending)

    def golden_split(self, version: int) -> Any:
        return RateSplit(3, 8, 1_700_000_000_123, 10, None)

    def golden_state(self, version: int) -> Any:
        return RateState(True, (RateSplit(0, 2, 5, 0, None), RateSplit(1, 2, 5, 7, 9)))


_RATE_KILLS = (
    "rate has no fixed input (what a run reads depends on the clock), so a kill could only "
    "be checked for gaps and repeats, which the numbers source's kill cases check on the "
    "same stream runtime; skipped to keep CI short"
)


class TestRate(ProjectSuite):
    unsupported: ClassVar = {Case.DRIVER_KILL: _RATE_KILLS, Case.WORKER_KILL: _RATE_KILLS}

    @pytest.fixture
    def context(self, tmp_path: Path) -> RateContext:
        return RateContext(tmp_path)


# --- files --------------------------------------------------------------------------


class FilesContext(ValueRows):
    """One parquet file per split; an append writes one more file (a new split)."""

    source_class = FileSource
    stream_options: ClassVar = {"maxFilesPerTrigger": 1}
    golden_directory = GOLDEN
    golden_prefix = "file"

    def create_input(self, splits: int) -> Mapping[str, Any]:
        self.values = []
        self.input = self.directory / f"input-{uuid.uuid4().hex[:8]}"
        self.input.mkdir()
        for split in range(splits):
            self.append(split)
        return {"path": str(self.input), "format": "parquet", "discoveryInterval": "200ms"}

    def append(self, split: int) -> None:
        values = self.take(ROWS)
        staged = self.directory / f".staged-{values[0]}.parquet"
        pq.write_table(pa.table({"value": pa.array(values, pa.int64())}), staged)
        staged.rename(self.input / f"part-{values[0]:08d}.parquet")  # appears whole

    def splits(self) -> SearchStrategy[Any]:
        return test_files_state.file_splits

    def states(self) -> SearchStrategy[Any]:
        return test_files_state.states

    def golden_split(self, version: int) -> Any:
        return test_serialization.GOLDEN_FILE_SPLIT

    def golden_state(self, version: int) -> Any:
        return {
            1: test_serialization.GOLDEN_FILE_STATE_V1,
            2: test_serialization.GOLDEN_FILE_STATE_V2,
        }[version]


class TestFiles(ProjectSuite):
    @pytest.fixture
    def context(self, tmp_path: Path) -> FilesContext:
        return FilesContext(tmp_path)


# --- kafka --------------------------------------------------------------------------


class KafkaContext(ValueRows):
    """A topic with a partition per split; values are the records' text."""

    source_class = KafkaSource
    stream_options: ClassVar = {"maxOffsetsPerTrigger": 1_000}
    golden_directory = GOLDEN

    def __init__(self, directory: Path, broker: KafkaBroker) -> None:
        super().__init__(directory)
        self.broker = broker

    def create_input(self, splits: int) -> Mapping[str, Any]:
        self.values = []
        self.topic = f"conformance-{uuid.uuid4().hex[:12]}"
        self.broker.create_topic(self.topic, splits)
        for split in range(splits):
            self.append(split)
        return {
            "kafka.bootstrap.servers": self.broker.bootstrap,
            "subscribe": self.topic,
            "startingOffsets": "earliest",
            "discoveryInterval": "1s",
        }

    def append(self, split: int) -> None:
        self.broker.produce(self.topic, [str(v) for v in self.take(ROWS)], partition=split)

    @contextmanager
    def outage(self) -> Iterator[None]:
        """The broker SIGKILLed, then started again on its data."""
        self.broker.kill()
        try:
            yield
        finally:
            self.broker.start()

    def splits(self) -> SearchStrategy[Any]:
        return test_kafka_options.kafka_splits

    def states(self) -> SearchStrategy[Any]:
        return test_kafka_options.kafka_states

    def golden_split(self, version: int) -> Any:
        return test_kafka_options.GOLDEN_SPLIT

    def golden_state(self, version: int) -> Any:
        return test_kafka_options.GOLDEN_STATE


@pytest.mark.kafka
class TestKafka(ProjectSuite):
    @pytest.fixture
    def context(self, tmp_path: Path, kafka_broker: KafkaBroker) -> KafkaContext:
        return KafkaContext(tmp_path, kafka_broker)
