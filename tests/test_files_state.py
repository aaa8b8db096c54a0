"""What the file enumerator remembers: only read files, versioned, and nothing lost on restore.

Driver side only, no Spark: the listings come from an in-memory filesystem
(:mod:`helpers.listing_fs`) whose files have exact modification times.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, rule

from enumerators.base import EnumeratorContext, ReadMode
from enumerators.files.enumerator import (
    FileEnumerator,
    FileEnumeratorState,
    FileEnumeratorStateSerializer,
    SplitCutter,
)
from enumerators.files.listing import ListedFile, Listing
from enumerators.runtime.admission import AdmissionLimits
from enumerators.runtime.coordinator import StreamCoordinator
from enumerators.runtime.offsets import StreamOffset
from enumerators.runtime.state_store import StateStore
from helpers.driving import Run, drive, logged
from helpers.listing_fs import ListingFileSystem
from sources.files.source import FileSource
from sources.files.splits import FileSplit
from sources.options import parse_options
from sources.serialization import frame, unframe
from sources.spark.datasource import plan_bounded

GOLDEN = Path(__file__).parent / "golden"
DAY = "/golden/in/day=2024-06-01"
CONTEXT = EnumeratorContext(ReadMode.STREAM)
MINUTE_MS = 60_000

texts = st.text(max_size=30)
longs = st.integers(-(1 << 63), (1 << 63) - 1)
file_splits = st.builds(
    FileSplit,
    path=texts,
    start=st.integers(0, 1 << 40),
    length=st.integers(0, 1 << 40),
    file_size=st.integers(0, 1 << 41),
    modified_ms=longs,
    partition=st.lists(st.tuples(texts, texts), max_size=2).map(tuple),
)
states = st.builds(
    FileEnumeratorState,
    pending=st.lists(file_splits, max_size=5).map(tuple),
    seen=st.dictionaries(texts, longs, max_size=50),
    to_clean=st.lists(texts, max_size=5).map(tuple),
    newest_ms=st.one_of(st.none(), longs),
)


@settings(max_examples=150, deadline=None)
@given(state=states)
# Python reads a local file name that is not UTF-8 with lone surrogates.
@example(FileEnumeratorState(seen={"/in/\udc80.csv": 1, "/in/b.csv": 2}, to_clean=("\udcff",)))
def test_any_file_enumerator_state_survives_frame_and_unframe(state: FileEnumeratorState) -> None:
    serializer = FileEnumeratorStateSerializer()
    assert unframe(serializer, frame(serializer, state), "a state") == state


@settings(max_examples=30, deadline=None)
@given(state=states)
def test_equal_file_enumerator_states_frame_to_the_same_bytes(state: FileEnumeratorState) -> None:
    reordered = FileEnumeratorState(
        state.pending, dict(reversed(state.seen.items())), state.to_clean, state.newest_ms
    )
    serializer = FileEnumeratorStateSerializer()
    assert frame(serializer, reordered) == frame(serializer, state)


def entry(name: str, size: int, modified_ms: int) -> dict[str, Any]:
    return {"name": name, "size": size, "type": "file", "mtime": modified_ms / 1000}


def listed_source(path: str, entries: list[dict[str, Any]], **options: str) -> FileSource:
    given = {
        "path": f"{ListingFileSystem.protocol}://{path}",
        "format": "csv",
        "storageOptions": json.dumps({"entries": entries}),
        **options,
    }
    return FileSource.from_options(parse_options("splitsource.files", FileSource.options, given))


def test_a_stream_restored_from_a_version_1_state_reads_every_file_once(tmp_path: Path) -> None:
    # The version 1 golden state: a.csv read, b.csv (two splits) and c.csv pending.
    entries = [
        entry(f"{DAY}/a.csv", 40, 1_717_200_000_000),
        entry(f"{DAY}/b.csv", 150, 1_717_200_060_000),
        entry(f"{DAY}/c.csv", 7, 1_717_200_120_000),
        entry(f"{DAY}/d.csv", 9, 1_717_200_180_000),  # arrived after the checkpoint
    ]
    source = listed_source("/golden/in", entries, maxSplitBytes="100")
    run = Run(StateStore(str(tmp_path / "state")))

    def driver() -> StreamCoordinator:
        return StreamCoordinator(source, AdmissionLimits(max_splits=1), run.store, 3600.0)

    v1 = StreamOffset(7, inline_state=(GOLDEN / "file_state_v1.bin").read_bytes()).to_json()
    first = driver()
    committed = drive(first, logged(v1), run, count=2)
    first.close()  # a restart between batches, the state now in version 2
    second = driver()
    drive(second, committed, run)
    second.close()

    assert sorted(run.read()) == [
        f"{DAY}/b.csv:0",
        f"{DAY}/b.csv:100",
        f"{DAY}/c.csv:0",
        f"{DAY}/d.csv:0",
    ]
    assert len(run.batches) == 4


def enumerator_for(source: FileSource, state: FileEnumeratorState | None = None) -> FileEnumerator:
    if state is None:
        enumerator = source.create_enumerator(CONTEXT)
    else:
        enumerator = source.restore_enumerator(CONTEXT, state)
    enumerator.handle_discovered_splits(enumerator.discover_more_splits())
    return enumerator


def restored(source: FileSource, enumerator: FileEnumerator) -> FileEnumerator:
    """The enumerator a new driver builds from ``enumerator``'s checkpoint, after its listing."""
    serializer = source.enumerator_state_serializer()
    state = unframe(serializer, frame(serializer, enumerator.snapshot_state(1)), "a state")
    return enumerator_for(source, state)


def ids(splits: list[FileSplit]) -> list[str]:
    return [split.split_id for split in splits]


def test_files_are_handed_out_oldest_first_and_newest_first_with_latest_first() -> None:
    entries = [entry(f"/in/{name}.csv", 5, ms) for name, ms in [("a", 3), ("b", 1), ("c", 2)]]
    entries.append(entry("/in/a2.csv", 5, 3))  # as old as a.csv: by path then
    oldest = enumerator_for(listed_source("/in", entries))
    newest = enumerator_for(listed_source("/in", entries, latestFirst="true"))

    assert ids(oldest.next_splits()) == [
        "/in/b.csv:0",
        "/in/c.csv:0",
        "/in/a.csv:0",
        "/in/a2.csv:0",
    ]
    assert ids(newest.next_splits()) == [
        "/in/a.csv:0",
        "/in/a2.csv:0",
        "/in/c.csv:0",
        "/in/b.csv:0",
    ]


def test_files_not_handed_out_are_not_state_yet_a_restart_reads_them() -> None:
    entries = [entry(f"/in/f-{i}.csv", 5, i * MINUTE_MS) for i in range(6)]
    source = listed_source("/in", entries)
    enumerator = enumerator_for(source)
    handed_out = enumerator.next_splits(2)
    enumerator.add_splits_back(enumerator.next_splits(2))  # planned, then abandoned

    state = enumerator.snapshot_state(1)
    assert sorted(state.seen) == ["/in/f-0.csv", "/in/f-1.csv"]
    assert state.pending == ()
    again = restored(source, enumerator)
    assert ids(again.next_splits()) == [f"/in/f-{i}.csv:0" for i in range(2, 6)]
    assert ids(handed_out) == ["/in/f-0.csv:0", "/in/f-1.csv:0"]


def test_the_rest_of_a_file_cut_by_the_split_limit_survives_a_restart() -> None:
    entries = [entry("/in/big.csv", 250, 0), entry("/in/small.csv", 5, MINUTE_MS)]
    source = listed_source("/in", entries, maxSplitBytes="100")
    enumerator = enumerator_for(source)
    assert ids(enumerator.next_splits(2)) == ["/in/big.csv:0", "/in/big.csv:100"]
    partly_given_back = enumerator.next_splits(1)
    enumerator.add_splits_back(partly_given_back)

    again = restored(source, enumerator)
    assert ids(again.next_splits()) == ["/in/big.csv:200", "/in/small.csv:0"]
    assert again.is_end_of_input()


def test_files_older_than_max_file_age_are_counted_in_a_warning_and_forgotten(
    caplog: pytest.LogCaptureFixture,
) -> None:
    day = 86_400_000
    entries = [entry(f"/in/old-{i}.csv", 5, i) for i in range(3)]
    entries.append(entry("/in/new.csv", 5, 2 * day))
    source = listed_source("/in", entries, maxFileAge="1d")
    with caplog.at_level(logging.INFO, logger="splitsource.files"):
        enumerator = enumerator_for(source)
        enumerator.handle_discovered_splits(enumerator.discover_more_splits())

    assert ids(enumerator.next_splits()) == ["/in/new.csv:0"]
    [warning] = [record for record in caplog.records if record.levelno == logging.WARNING]
    assert "3 file(s)" in warning.getMessage()
    assert "/in/old-0.csv" in warning.getMessage()
    assert len(caplog.records) == 1  # the same files again are not reported again
    assert enumerator.snapshot_state(1).seen == {"/in/new.csv": 2 * day}


def test_a_file_read_then_forgotten_by_age_is_not_read_again() -> None:
    day = 86_400_000
    entries = [entry("/in/a.csv", 5, 0)]
    source = listed_source("/in", entries, maxFileAge="1d")
    enumerator = enumerator_for(source)
    assert ids(enumerator.next_splits()) == ["/in/a.csv:0"]
    newer = listed_source("/in", [*entries, entry("/in/b.csv", 5, 2 * day)], maxFileAge="1d")

    again = enumerator_for(newer, enumerator.snapshot_state(1))
    assert ids(again.next_splits()) == ["/in/b.csv:0"]
    assert "/in/a.csv" not in again.snapshot_state(2).seen


def test_a_discovery_given_as_plain_splits_is_taken_file_by_file() -> None:
    entries = [entry("/in/a.csv", 250, 0), entry("/in/b.csv", 5, MINUTE_MS)]
    source = listed_source("/in", entries, maxSplitBytes="100")
    found = source.create_enumerator(CONTEXT).discover_more_splits()
    enumerator = source.create_enumerator(CONTEXT)
    enumerator.handle_discovered_splits(list(found))  # another enumerator's listing

    assert ids(enumerator.next_splits()) == [
        "/in/a.csv:0",
        "/in/a.csv:100",
        "/in/a.csv:200",
        "/in/b.csv:0",
    ]


def test_a_bounded_read_reads_files_of_any_age() -> None:
    day = 86_400_000
    entries = [entry("/in/old.csv", 5, 0), entry("/in/new.csv", 5, 30 * day)]

    planned = plan_bounded(listed_source("/in", entries, maxFileAge="1d"))

    assert sorted(ids(planned)) == ["/in/new.csv:0", "/in/old.csv:0"]


class FileEnumeratorMachine(RuleBasedStateMachine):
    """Files arriving, listings, batches with refused splits, restarts and crashes, at random.

    A batch takes splits, gives a tail back (as the byte budget does) and either
    is logged (its splits count as read, the state is checkpointed) or dies
    before Spark logs it (the enumerator is restored from the last checkpoint).
    In the end every split of every file must have been read exactly once.
    """

    def __init__(self) -> None:
        super().__init__()
        self.fs = ListingFileSystem(skip_instance_cache=True)
        self.serializer = FileEnumeratorStateSerializer()
        self.read: Counter[str] = Counter()
        self.enumerator = self.restore(FileEnumeratorState())
        self.checkpoint = frame(self.serializer, self.enumerator.snapshot_state(0))

    def restore(self, state: FileEnumeratorState) -> FileEnumerator:
        # The glob may match nothing.
        return FileEnumerator(self.fs, Listing(("/in/*",)), SplitCutter(100), state)

    @rule(size=st.integers(0, 350))
    def a_file_arrives(self, size: int) -> None:
        count = len(self.fs.entries)
        self.fs.entries[f"/in/f-{count:03d}.csv"] = entry(f"/in/f-{count:03d}.csv", size, count)

    @rule()
    def listing(self) -> None:
        self.enumerator.handle_discovered_splits(self.enumerator.discover_more_splits())

    @rule(
        wanted=st.one_of(st.none(), st.integers(0, 5)),
        refused=st.integers(0, 3),
        logged=st.booleans(),
    )
    def batch(self, wanted: int | None, refused: int, logged: bool) -> None:
        taken = self.enumerator.next_splits(wanted)
        kept = len(taken) - min(refused, len(taken))
        self.enumerator.add_splits_back(taken[kept:])
        if not logged:  # the driver dies before Spark logs the batch
            self.enumerator = self.restore(unframe(self.serializer, self.checkpoint, "state"))
            return
        self.read.update(split.split_id for split in taken[:kept])
        assert max(self.read.values(), default=1) == 1
        self.checkpoint = frame(self.serializer, self.enumerator.snapshot_state(1))

    @rule()
    def restart(self) -> None:
        self.enumerator = self.restore(unframe(self.serializer, self.checkpoint, "state"))

    def teardown(self) -> None:
        self.listing()
        self.read.update(split.split_id for split in self.enumerator.next_splits())
        files = [ListedFile(e["name"], e["size"], 0) for e in self.fs.entries.values()]
        expected = [split.split_id for f in files for split in SplitCutter(100).cut(f)]
        assert sorted(self.read.elements()) == sorted(expected)


TestFileEnumeratorMachine = FileEnumeratorMachine.TestCase
TestFileEnumeratorMachine.settings = settings(
    max_examples=150, stateful_step_count=30, deadline=None
)
