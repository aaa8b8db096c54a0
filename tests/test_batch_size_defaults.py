"""How many rows an Arrow batch holds when the user does not say: the source's default."""

from __future__ import annotations

import pytest
from pyspark.sql.types import LongType, StructField, StructType

from sources.numbers.source import NumberSequenceSource
from sources.numbers.splits import NumberSequenceSplit
from sources.spark.partitions import SplitPartitionReading
from sources.tuning import Tuning

SCHEMA = StructType([StructField("value", LongType(), nullable=False)])


class BigBatchNumbers(NumberSequenceSource):
    tuning = Tuning(max_records_per_batch=25_000)


def batch_rows(source_class: type[NumberSequenceSource], **given: str) -> list[int]:
    source, options = source_class.from_spark_options({"to": "59999", **given})
    reading = SplitPartitionReading(source, SCHEMA, options)
    (partition,) = reading.partitions_of([NumberSequenceSplit(0, 0, 59_999)])
    return [batch.num_rows for batch in reading.read(partition)]


@pytest.mark.parametrize(
    ("source_class", "given", "expected"),
    [
        (NumberSequenceSource, {}, [10_000] * 6),
        (BigBatchNumbers, {}, [25_000, 25_000, 10_000]),
        (BigBatchNumbers, {"maxRecordsPerBatch": "20000"}, [20_000] * 3),
    ],
)
def test_batches_hold_the_sources_default_unless_the_user_gives_maxRecordsPerBatch(
    source_class: type[NumberSequenceSource], given: dict[str, str], expected: list[int]
) -> None:
    assert batch_rows(source_class, **given) == expected
