"""The Kafka source without a broker: options as Spark names them, offsets specs, serializers."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql.streaming.datasource import ReadMaxRows

from enumerators.base import ReadMode
from enumerators.kafka.enumerator import KafkaEnumeratorState, KafkaEnumeratorStateSerializer
from enumerators.runtime.admission import AdmissionLimits, RecordSharing
from readers.kafka.reader import _TUNING
from sources.errors import InvalidOptionError
from sources.kafka.source import KafkaSource
from sources.kafka.splits import KafkaPartitionSplit, KafkaPartitionSplitSerializer
from sources.serialization import frame, unframe
from sources.spark.datasource import data_source_for
from sources.testing.planning import stream_reader

GOLDEN = Path(__file__).parent / "golden"
BASE = {"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "events"}


def source(**given: str) -> KafkaSource:
    options = {**BASE, **given}
    built, _ = KafkaSource.from_spark_options({k: v for k, v in options.items() if v})
    return built


def error_of(**given: str) -> str:
    with pytest.raises(InvalidOptionError) as caught:
        source(**given)
    return str(caught.value)


# --- options ------------------------------------------------------------------


def test_kafka_settings_pass_through_and_spark_aliases_apply() -> None:
    built, framework = KafkaSource.from_spark_options(
        {**BASE, "kafka.Fetch.Min.Bytes": "10", "minOffsetsPerTrigger": "500"},
        extra=_stream_options(),
    )
    assert built.reader_config.kafka.client()["fetch.min.bytes"] == "10"
    assert framework["minRecordsPerTrigger"] == 500


@pytest.mark.parametrize(
    ("given", "sharing"),
    [
        ("maxOffsetsPerTrigger", RecordSharing.PROPORTIONAL),
        ("MAXOFFSETSPERTRIGGER", RecordSharing.PROPORTIONAL),
        ("maxRecordsPerTrigger", RecordSharing.FAIR),
    ],
)
def test_max_offsets_per_trigger_shares_by_sparks_rule_and_max_records_fairly(
    given: str, sharing: RecordSharing
) -> None:
    reader = stream_reader(KafkaSource, {**BASE, given: "1200"})
    assert reader.limits == AdmissionLimits(max_records=1200, record_sharing=sharing)
    assert reader.getDefaultReadLimit() == ReadMaxRows(1200)


def test_max_offsets_and_max_records_per_trigger_together_fail_at_load_naming_both() -> None:
    given = {**BASE, "maxOffsetsPerTrigger": "1200", "maxRecordsPerTrigger": "1200"}
    with pytest.raises(InvalidOptionError) as caught:
        data_source_for(KafkaSource)(given)
    message = str(caught.value)
    assert "'maxOffsetsPerTrigger'" in message and "maxRecordsPerTrigger" in message
    assert "choose one" in message


def test_bootstrap_servers_are_required() -> None:
    message = error_of(**{"kafka.bootstrap.servers": ""})
    assert "kafka.bootstrap.servers" in message and "required" in message


@pytest.mark.parametrize(
    ("given", "named"),
    [
        ({"subscribe": ""}, "subscribe"),
        ({"subscribePattern": "e.*"}, "subscribe"),
        ({"assign": '{"events":[0]}'}, "subscribe"),
    ],
)
def test_exactly_one_topic_selection(given: dict[str, str], named: str) -> None:
    message = error_of(**given)
    assert f"Option '{named}'" in message and "exactly one of" in message


@pytest.mark.parametrize("setting", ["auto.offset.reset", "enable.auto.commit"])
def test_settings_owned_by_the_source_are_refused(setting: str) -> None:
    message = error_of(**{f"kafka.{setting}": "x"})
    assert f"kafka.{setting}" in message and "not supported" in message


def test_malformed_offsets_json_names_the_option() -> None:
    message = error_of(startingOffsets='{"events": [1]}')
    assert "startingOffsets" in message and '{"topicA":{"0":23,"1":-2}}' in message


def test_ending_offsets_are_refused_for_streams() -> None:
    with pytest.raises(InvalidOptionError, match=r"endingOffsets.*batch queries"):
        source(endingOffsets="latest").enumerator_config.bounds.requests(ReadMode.STREAM)


def test_starting_at_latest_is_refused_for_batch_reads() -> None:
    with pytest.raises(InvalidOptionError, match=r"startingOffsets.*cannot be latest"):
        source(startingOffsets="latest").enumerator_config.bounds.requests(ReadMode.BATCH)


def test_offsets_default_as_in_spark() -> None:
    stream_start, _ = source().enumerator_config.bounds.requests(ReadMode.STREAM)
    batch_start, batch_end = source().enumerator_config.bounds.requests(ReadMode.BATCH)
    assert stream_start.lookup(("events", 0)) == ("latest", 0)
    assert batch_start.lookup(("events", 0)) == ("earliest", 0)
    assert batch_end is not None and batch_end.lookup(("events", 0)) == ("latest", 0)


def test_timestamp_options_win_over_offsets_as_in_spark() -> None:
    built = source(
        startingOffsets="earliest",
        startingOffsetsByTimestamp='{"events":{"0":1000}}',
        startingTimestamp="2000",
    )
    start, _ = built.enumerator_config.bounds.requests(ReadMode.STREAM)
    assert start.lookup(("events", 0)) == ("timestamp", 2000)


def test_specific_offsets_must_name_every_partition() -> None:
    built = source(startingOffsets='{"events":{"0":5,"1":-2}}')
    start, _ = built.enumerator_config.bounds.requests(ReadMode.STREAM)
    assert start.lookup(("events", 0)) == ("offset", 5)
    assert start.lookup(("events", 1)) == ("earliest", 0)
    with pytest.raises(InvalidOptionError, match="events-2"):
        start.check_covers("splitsource.kafka", [("events", 0), ("events", 2)])


def test_jaas_config_becomes_librdkafka_credentials_and_secrets_stay_hidden() -> None:
    jaas = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="alice" password="s3cr3t-pw";'
    )
    built = source(**{"kafka.sasl.jaas.config": jaas, "kafka.security.protocol": "SASL_PLAINTEXT"})
    client = built.reader_config.kafka.client()
    assert (client["sasl.username"], client["sasl.password"]) == ("alice", "s3cr3t-pw")
    assert client["sasl.mechanism"] == "PLAIN"
    assert "s3cr3t-pw" not in repr(built.enumerator_config) + repr(built.reader_config)


def test_commit_offsets_needs_a_group() -> None:
    assert "kafka.group.id" in error_of(commitOffsets="true")


def test_options_fill_the_configs_they_land_in() -> None:
    built = source(
        **{
            "failOnDataLoss": "false",
            "kafkaConsumer.pollTimeoutMs": "500",
            "fetchOffset.numRetries": "7",
            "fetchOffset.retryIntervalMs": "20",
            "includeHeaders": "true",
            "minPartitions": "4",
            "kafka.group.id": "lag",
            "commitOffsets": "true",
        }
    )
    enumerator, reader = built.enumerator_config, built.reader_config
    assert not enumerator.fail_on_data_loss and not reader.fail_on_data_loss
    assert reader.poll_timeout_ms == 500
    assert (enumerator.retries.num_retries, enumerator.retries.retry_interval_ms) == (7, 20)
    assert enumerator.commit_offsets and enumerator.group_id == reader.group_id == "lag"
    assert built.config.include_headers and "headers" in built.schema()
    assert (built.config.min_partitions, built.config.max_records_per_partition) == (4, None)


def test_options_left_out_fill_the_configs_with_spark_defaults() -> None:
    built = source()
    enumerator, reader = built.enumerator_config, built.reader_config
    assert enumerator.fail_on_data_loss and reader.fail_on_data_loss
    assert reader.poll_timeout_ms == 120_000
    assert (enumerator.retries.num_retries, enumerator.retries.retry_interval_ms) == (3, 10)
    assert not enumerator.commit_offsets and not built.config.include_headers
    assert reader.group_id.startswith("spark-kafka-source-")


def _stream_options() -> Any:
    from sources.framework_options import STREAM_OPTIONS

    return STREAM_OPTIONS


# --- serializers ----------------------------------------------------------------

topics = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=40)
offsets = st.integers(0, (1 << 63) - 1)
kafka_splits = st.builds(
    KafkaPartitionSplit,
    topic=topics,
    partition=st.integers(0, (1 << 31) - 1),
    start=offsets,
    end=st.none() | offsets,
)
kafka_states = st.builds(
    KafkaEnumeratorState,
    initialized=st.booleans(),
    known=st.frozensets(st.tuples(topics, st.integers(0, 5000)), max_size=50),
    pending=st.lists(kafka_splits, max_size=10).map(tuple),
)


@settings(max_examples=200)
@given(split=kafka_splits)
def test_any_kafka_split_survives_frame_and_unframe(split: KafkaPartitionSplit) -> None:
    serializer = KafkaPartitionSplitSerializer()
    assert unframe(serializer, frame(serializer, split), "a split") == split


@settings(max_examples=100)
@given(state=kafka_states)
def test_any_kafka_enumerator_state_survives_frame_and_unframe(
    state: KafkaEnumeratorState,
) -> None:
    serializer = KafkaEnumeratorStateSerializer()
    assert unframe(serializer, frame(serializer, state), "a state") == state


def test_known_partitions_are_stored_as_runs() -> None:
    state = KafkaEnumeratorState(True, frozenset(("t", p) for p in range(1000)))
    assert len(KafkaEnumeratorStateSerializer().serialize(state)) < 80


GOLDEN_SPLIT = KafkaPartitionSplit("orders.v2-eu", 11, 1_234_567, None)
GOLDEN_STATE = KafkaEnumeratorState(
    True,
    frozenset({("a", 0), ("a", 1), ("a", 2), ("a", 5), ("b-1", 0)}),
    (KafkaPartitionSplit("b-1", 0, 0, None), KafkaPartitionSplit("a", 5, 42, 100)),
)


@pytest.mark.parametrize(
    ("name", "serializer", "value"),
    [
        ("kafka_split_v1.bin", KafkaPartitionSplitSerializer(), GOLDEN_SPLIT),
        ("kafka_state_v1.bin", KafkaEnumeratorStateSerializer(), GOLDEN_STATE),
    ],
)
def test_kafka_golden_files_still_read_and_write_the_same(
    name: str, serializer: Any, value: Any
) -> None:
    data = (GOLDEN / name).read_bytes()
    assert unframe(serializer, data, name) == value
    assert frame(serializer, value) == data


# --- cutting ranges for parallelism -------------------------------------------------


@settings(max_examples=200)
@given(
    lengths=st.lists(st.integers(0, 10_000), min_size=1, max_size=8),
    min_partitions=st.none() | st.integers(1, 64),
    max_records=st.none() | st.integers(1, 5_000),
)
def test_cut_ranges_read_the_same_offsets_within_the_limits(
    lengths: list[int], min_partitions: int | None, max_records: int | None
) -> None:
    options = {}
    if min_partitions is not None:
        options["minPartitions"] = str(min_partitions)
    if max_records is not None:
        options["maxRecordsPerPartition"] = str(max_records)
    splits = [KafkaPartitionSplit("t", i, 7, 7 + n) for i, n in enumerate(lengths)]
    pieces = source(**options).refine_plan(splits)

    for split in splits:
        own = [p for p in pieces if p.partition == split.partition]
        assert own[0].start == split.start and own[-1].end == split.end
        assert all(a.end == b.start for a, b in itertools.pairwise(own))
    sizes = [(p.end or 0) - p.start for p in pieces]
    if max_records is not None:
        assert max(sizes) <= max_records
    if min_partitions is not None and sum(lengths) >= min_partitions:
        assert len(pieces) >= min(min_partitions, sum(lengths))


def test_the_readers_consumer_settings_are_documented_with_their_values() -> None:
    """docs/kafka.md lists each setting the readers give librdkafka in place of its default."""
    page = (Path(__file__).parents[1] / "docs" / "kafka.md").read_text()
    for setting, value in _TUNING.items():
        assert f"`{setting}` = {value}" in page, setting
