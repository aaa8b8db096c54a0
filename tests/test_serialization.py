"""Versioned framing: round trips, golden bytes, format evolution and damaged data."""

from __future__ import annotations

import struct
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from enumerators.files.enumerator import FileEnumeratorState, FileEnumeratorStateSerializer
from sources.errors import CorruptDataError, NewerVersionError, SerializationError
from sources.files.splits import FileSplit, FileSplitSerializer
from sources.numbers.source import (
    NumberSequenceSplit,
    NumberSequenceSplitSerializer,
    NumberSequenceStateSerializer,
)
from sources.serialization import SimpleVersionedSerializer, frame, unframe

GOLDEN = Path(__file__).parent / "golden"
LONG_MIN = -(1 << 63)
LONG_MAX = (1 << 63) - 1

longs = st.integers(LONG_MIN, LONG_MAX)
splits = st.builds(NumberSequenceSplit, index=st.integers(0, (1 << 32) - 1), start=longs, end=longs)
states = st.lists(splits, max_size=20)

# The values stored in tests/golden (see tests/golden/README.md).
GOLDEN_SPLIT = NumberSequenceSplit(index=7, start=-5, end=1_000_000_000_000)
GOLDEN_STATE = [
    NumberSequenceSplit(0, 0, 99),
    NumberSequenceSplit(1, LONG_MIN, LONG_MAX),
    NumberSequenceSplit((1 << 32) - 1, 10, 9),
]

# A split and a state, framed: the data the corruption tests damage.
FRAMED = [
    pytest.param(NumberSequenceSplitSerializer(), GOLDEN_SPLIT, id="split"),
    pytest.param(NumberSequenceStateSerializer(), GOLDEN_STATE, id="state"),
]


# --- round trips ------------------------------------------------------------


@settings(max_examples=200)
@given(split=splits)
def test_any_number_split_survives_frame_and_unframe(split: NumberSequenceSplit) -> None:
    serializer = NumberSequenceSplitSerializer()
    assert unframe(serializer, frame(serializer, split), "a split") == split


@settings(max_examples=100)
@given(state=states)
def test_any_list_of_pending_splits_survives_frame_and_unframe(
    state: list[NumberSequenceSplit],
) -> None:
    serializer = NumberSequenceStateSerializer()
    assert unframe(serializer, frame(serializer, state), "a state") == state


@given(split=splits)
@settings(max_examples=50)
def test_framing_the_same_split_twice_gives_the_same_bytes(split: NumberSequenceSplit) -> None:
    serializer = NumberSequenceSplitSerializer()
    assert frame(serializer, split) == frame(serializer, split)


# --- golden files -----------------------------------------------------------


def test_split_checkpointed_by_version_1_still_reads_as_the_same_split() -> None:
    data = (GOLDEN / "numbers_split_v1.bin").read_bytes()
    assert unframe(NumberSequenceSplitSerializer(), data, "golden split") == GOLDEN_SPLIT


def test_split_serializer_still_writes_the_version_1_bytes() -> None:
    data = (GOLDEN / "numbers_split_v1.bin").read_bytes()
    assert frame(NumberSequenceSplitSerializer(), GOLDEN_SPLIT) == data


def test_state_checkpointed_by_version_1_still_reads_as_the_same_state() -> None:
    data = (GOLDEN / "numbers_state_v1.bin").read_bytes()
    assert unframe(NumberSequenceStateSerializer(), data, "golden state") == GOLDEN_STATE


def test_state_serializer_still_writes_the_version_1_bytes() -> None:
    data = (GOLDEN / "numbers_state_v1.bin").read_bytes()
    assert frame(NumberSequenceStateSerializer(), GOLDEN_STATE) == data


# The file source's golden files (see tests/golden/README.md).
DAY = "/golden/in/day=2024-06-01"
DAY_PARTITION = (("day", "2024-06-01"),)
GOLDEN_FILE_SPLIT = FileSplit(
    f"{DAY}/b.csv", 128 << 20, 1000, (128 << 20) + 1000, 1_717_200_000_123, DAY_PARTITION
)
GOLDEN_FILE_STATE_V1 = FileEnumeratorState(
    pending=(
        FileSplit(f"{DAY}/b.csv", 0, 100, 150, 1_717_200_060_000, DAY_PARTITION),
        FileSplit(f"{DAY}/b.csv", 100, 50, 150, 1_717_200_060_000, DAY_PARTITION),
        FileSplit(f"{DAY}/c.csv", 0, 7, 7, 1_717_200_120_000, DAY_PARTITION),
    ),
    seen={
        f"{DAY}/a.csv": 1_717_200_000_000,
        f"{DAY}/b.csv": 1_717_200_060_000,
        f"{DAY}/c.csv": 1_717_200_120_000,
    },
    to_clean=(f"{DAY}/a.csv",),
    newest_ms=1_717_200_120_000,  # version 1 kept the newest file found among the seen
)
GOLDEN_FILE_STATE_V2 = FileEnumeratorState(
    pending=(FileSplit(f"{DAY}/b.csv", 100, 50, 150, 1_717_200_060_000, DAY_PARTITION),),
    seen={
        f"{DAY}/b.csv": 1_717_200_060_000,
        f"{DAY}/a.csv": 1_717_200_000_000,
        "/golden/in/é/ü.csv": 1_717_200_000_001,
    },
    to_clean=(f"{DAY}/a.csv",),
    newest_ms=1_717_200_120_000,
)


def test_file_split_checkpointed_by_version_1_still_reads_as_the_same_split() -> None:
    data = (GOLDEN / "file_split_v1.bin").read_bytes()
    assert unframe(FileSplitSerializer(), data, "golden split") == GOLDEN_FILE_SPLIT


def test_file_split_serializer_still_writes_the_version_1_bytes() -> None:
    data = (GOLDEN / "file_split_v1.bin").read_bytes()
    assert frame(FileSplitSerializer(), GOLDEN_FILE_SPLIT) == data


def test_file_state_checkpointed_by_version_1_still_reads_with_its_pending_splits() -> None:
    data = (GOLDEN / "file_state_v1.bin").read_bytes()
    state = unframe(FileEnumeratorStateSerializer(), data, "golden state")
    assert state == GOLDEN_FILE_STATE_V1


def test_file_state_checkpointed_by_version_2_still_reads_as_the_same_state() -> None:
    data = (GOLDEN / "file_state_v2.bin").read_bytes()
    state = unframe(FileEnumeratorStateSerializer(), data, "golden state")
    assert state == GOLDEN_FILE_STATE_V2


def _decompressed_body(framed: bytes) -> bytes:
    """A version 2 file state without its zstd compression, which a zstd upgrade may change."""
    payload = framed[17:]  # after the frame header
    (size,) = struct.unpack_from(">Q", payload)
    body: bytes = pa.Codec("zstd").decompress(payload[8:], size, asbytes=True)
    return body


def test_file_state_serializer_still_writes_the_version_2_layout() -> None:
    data = (GOLDEN / "file_state_v2.bin").read_bytes()
    written = frame(FileEnumeratorStateSerializer(), GOLDEN_FILE_STATE_V2)
    assert written[:9] == data[:9]  # magic, frame layout, version 2
    assert _decompressed_body(written) == _decompressed_body(data)


# --- evolution --------------------------------------------------------------


class _PointV1(SimpleVersionedSerializer[tuple[int, int]]):
    """Version 1 of a test format: stores only x; y is always 0."""

    @property
    def version(self) -> int:
        return 1

    def serialize(self, obj: tuple[int, int]) -> bytes:
        return struct.pack(">q", obj[0])

    def deserialize(self, version: int, data: bytes) -> tuple[int, int]:
        if version != 1:
            raise CorruptDataError(f"unknown version {version}")
        (x,) = struct.unpack(">q", data)
        return (x, 0)


class _PointV2(SimpleVersionedSerializer[tuple[int, int]]):
    """Version 2 adds y; version 1 payloads read with y defaulting to 0."""

    @property
    def version(self) -> int:
        return 2

    def serialize(self, obj: tuple[int, int]) -> bytes:
        return struct.pack(">qq", *obj)

    def deserialize(self, version: int, data: bytes) -> tuple[int, int]:
        if version == 1:
            (x,) = struct.unpack(">q", data)
            return (x, 0)
        if version == 2:
            x, y = struct.unpack(">qq", data)
            return (x, y)
        raise CorruptDataError(f"unknown version {version}")


def test_newer_serializer_reads_data_written_by_the_older_version() -> None:
    old_bytes = frame(_PointV1(), (42, 0))
    assert unframe(_PointV2(), old_bytes, "a point") == (42, 0)


def test_newer_serializer_reads_its_own_version() -> None:
    assert unframe(_PointV2(), frame(_PointV2(), (42, -7)), "a point") == (42, -7)


def test_older_serializer_refuses_data_from_a_newer_version() -> None:
    new_bytes = frame(_PointV2(), (42, -7))
    with pytest.raises(NewerVersionError, match="newer version") as caught:
        unframe(_PointV1(), new_bytes, "a point")
    message = str(caught.value)
    assert "_PointV1" in message
    assert "(2)" in message  # the version found
    assert "up to 1" in message  # the versions this code reads


def test_serializer_with_version_zero_cannot_frame() -> None:
    class VersionZero(_PointV1):
        @property
        def version(self) -> int:
            return 0

    with pytest.raises(SerializationError, match="positive integer"):
        frame(VersionZero(), (1, 0))


# --- damaged data -----------------------------------------------------------


@pytest.mark.parametrize(("serializer", "value"), FRAMED)
def test_every_truncation_of_framed_data_is_reported_as_corrupt(
    serializer: SimpleVersionedSerializer[object], value: object
) -> None:
    data = frame(serializer, value)
    for length in range(len(data)):
        with pytest.raises(CorruptDataError, match="truncated"):
            unframe(serializer, data[:length], f"prefix of {length} bytes")


@settings(max_examples=30)
@given(split=splits, extra=st.binary(min_size=1, max_size=8))
def test_trailing_bytes_after_a_frame_are_reported_as_corrupt(
    split: NumberSequenceSplit, extra: bytes
) -> None:
    serializer = NumberSequenceSplitSerializer()
    with pytest.raises(CorruptDataError):
        unframe(serializer, frame(serializer, split) + extra, "a split")


@settings(max_examples=25)
@given(bit=st.integers(0, 7))
@pytest.mark.parametrize(("serializer", "value"), FRAMED)
def test_flipping_any_bit_never_decodes_to_a_value(
    serializer: SimpleVersionedSerializer[object], value: object, bit: int
) -> None:
    data = frame(serializer, value)
    for position in range(len(data)):
        damaged = bytearray(data)
        damaged[position] ^= 1 << bit
        with pytest.raises((CorruptDataError, NewerVersionError)):
            unframe(serializer, bytes(damaged), f"byte {position}")


@settings(max_examples=25)
@given(mask=st.integers(1, 255))
def test_damaging_any_whole_byte_never_decodes_to_a_value(mask: int) -> None:
    serializer = NumberSequenceStateSerializer()
    data = frame(serializer, GOLDEN_STATE)
    for position in range(len(data)):
        damaged = bytearray(data)
        damaged[position] ^= mask
        with pytest.raises((CorruptDataError, NewerVersionError)):
            unframe(serializer, bytes(damaged), f"byte {position}")


def test_damaged_payload_is_reported_as_a_checksum_mismatch() -> None:
    serializer = NumberSequenceSplitSerializer()
    damaged = bytearray(frame(serializer, GOLDEN_SPLIT))
    damaged[-1] ^= 0xFF
    with pytest.raises(CorruptDataError, match="checksum does not match"):
        unframe(serializer, bytes(damaged), "a split")


def test_bytes_without_the_magic_are_reported_as_not_written_by_splitsource() -> None:
    serializer = NumberSequenceSplitSerializer()
    data = b"JUNK" + frame(serializer, GOLDEN_SPLIT)[4:]
    with pytest.raises(CorruptDataError, match="not written by splitsource") as caught:
        unframe(serializer, data, "a split")
    assert "b'JUNK'" in str(caught.value)


def test_unknown_frame_layout_asks_to_upgrade_splitsource() -> None:
    serializer = NumberSequenceSplitSerializer()
    damaged = bytearray(frame(serializer, GOLDEN_SPLIT))
    damaged[4] = 2
    with pytest.raises(NewerVersionError, match=r"frame layout 2\b.*Upgrade splitsource"):
        unframe(serializer, bytes(damaged), "a split")


def test_well_framed_bytes_of_another_type_are_reported_as_corrupt() -> None:
    # The split frame is intact, but its payload is not a state.
    data = frame(NumberSequenceSplitSerializer(), GOLDEN_SPLIT)
    with pytest.raises(CorruptDataError, match="announces 7 splits"):
        unframe(NumberSequenceStateSerializer(), data, "a state")


def test_deserializer_crash_is_reported_as_corrupt_data() -> None:
    class Crashing(_PointV1):
        def deserialize(self, version: int, data: bytes) -> tuple[int, int]:
            raise KeyError("boom")

    with pytest.raises(CorruptDataError, match="Crashing failed on version 1 data") as caught:
        unframe(Crashing(), frame(_PointV1(), (1, 0)), "a point")
    assert isinstance(caught.value.__cause__, KeyError)


def test_a_bug_in_a_deserializer_is_not_disguised_as_corrupt_data() -> None:
    class Buggy(_PointV1):
        def deserialize(self, version: int, data: bytes) -> tuple[int, int]:
            return data.decoded  # type: ignore[attr-defined,no-any-return]

    with pytest.raises(AttributeError, match="decoded"):
        unframe(Buggy(), frame(_PointV1(), (1, 0)), "a point")


def _truncated() -> bytes:
    return frame(NumberSequenceSplitSerializer(), GOLDEN_SPLIT)[:5]


def _short_payload() -> bytes:
    return frame(NumberSequenceSplitSerializer(), GOLDEN_SPLIT)[:-1]


def _wrong_magic() -> bytes:
    return b"XXXX" + frame(NumberSequenceSplitSerializer(), GOLDEN_SPLIT)[4:]


def _bad_checksum() -> bytes:
    data = bytearray(frame(NumberSequenceSplitSerializer(), GOLDEN_SPLIT))
    data[-1] ^= 1
    return bytes(data)


def _newer_layout() -> bytes:
    data = bytearray(frame(NumberSequenceSplitSerializer(), GOLDEN_SPLIT))
    data[4] = 9
    return bytes(data)


def _newer_version() -> bytes:
    class Version5(NumberSequenceSplitSerializer):
        @property
        def version(self) -> int:
            return 5

    return frame(Version5(), GOLDEN_SPLIT)


def _wrong_payload() -> bytes:
    return frame(NumberSequenceStateSerializer(), [])


@pytest.mark.parametrize(
    "make",
    [
        _truncated,
        _short_payload,
        _wrong_magic,
        _bad_checksum,
        _newer_layout,
        _newer_version,
        _wrong_payload,
    ],
)
def test_every_read_error_names_what_was_being_read(make: object) -> None:
    assert callable(make)
    what = "split 3 of splitsource.numbers"
    with pytest.raises(SerializationError) as caught:
        unframe(NumberSequenceSplitSerializer(), make(), what)
    assert str(caught.value).startswith(f"Cannot read {what}:")
