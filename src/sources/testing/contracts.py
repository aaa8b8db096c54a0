"""Two contracts checked without Spark, each failure naming the method that breaks it.

The stream cases see a broken contract only as rows lost or repeated, after minutes of
Spark; these see it in a second, and know which method is wrong:

- a split reader reads exactly the range it is given (:func:`check_split_ranges`): a
  range read in two halves gives the records of the whole range, none repeated at the
  cut and none dropped at an end;
- an enumerator's checkpoint keeps what it handed out apart from what is pending
  (:func:`check_enumerator_checkpoint`): restored from a snapshot taken after handing
  out a split, it hands out the others and not that one.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from enumerators.base import EnumeratorContext, PeriodicSplitEnumerator, ReadMode, SplitEnumerator
from sources.capabilities import counts_records
from sources.incremental_table import IncrementalTableSource
from sources.serialization import frame, unframe
from sources.spark.partitions import arrow_schema
from sources.split import SourceSplit
from sources.testing.cases import read_all_of, rows_of, source_of
from sources.testing.planning import logged, next_batch, partition_splits, stream_reader

if TYPE_CHECKING:
    from sources.api import Source
    from sources.testing.context import ConformanceContext

__all__ = ["check_enumerator_checkpoint", "check_split_ranges"]

_ROUNDS = 8
"""``next_splits`` calls that drain an enumerator (a few come back empty while others wait)."""


def check_split_ranges(context: ConformanceContext, options: Mapping[str, Any]) -> None:
    """Each range of a stream's first micro-batch, read whole and read as two halves cut at
    its middle position, gives the same records; where positions count records, as many
    records as positions."""
    driver = stream_reader(context.source_class, options)
    try:
        start = logged(driver.initialOffset())
        ranges = partition_splits(driver, driver.partitions(start, next_batch(driver, start)))
        source, schema = driver.source, arrow_schema(driver.schema)
    finally:
        driver.stop()
    probe = source.create_reader(schema)
    reader_name = _range_reading_method(source, probe)
    probe.close()

    def read(split: SourceSplit) -> list[Hashable]:
        return rows_of(context, read_all_of(source.create_reader(schema), [split]))

    for split in ranges:
        low, high = split.start_position(), split.end_position()
        if high is None or high - low < 2:
            continue  # read whole: no position to cut at
        cut = low + (high - low) // 2
        whole = read(split)
        if counts_records(source, split) and len(whole) != high - low:
            raise AssertionError(
                f"{reader_name} read {len(whole)} records of split {split.split_id}'s "
                f"range [{low}, {high}), whose positions count records: {high - low} "
                "expected. A reader reads from the range's start position up to, not "
                "including, its end position (check fetch and with_range)."
            )
        halves = read(split.with_range(low, cut)) + read(split.with_range(cut, high))
        _check_halves(reader_name, split.split_id, (low, cut, high), whole, halves)


def _check_halves(
    reader: str,
    split_id: str,
    at: tuple[int, int, int],
    whole: Sequence[Hashable],
    halves: Sequence[Hashable],
) -> None:
    low, cut, high = at
    repeated, lost = Counter(halves) - Counter(whole), Counter(whole) - Counter(halves)
    read_as = f"split {split_id} read as [{low}, {cut}) and [{cut}, {high})"
    if repeated:
        raise AssertionError(
            f"{reader} reads past the end of the range it is given: {read_as} gave "
            f"{sum(repeated.values())} record(s) more than [{low}, {high}) read whole (e.g. "
            f"{list(repeated)[:3]}). Stop before the end position of each range "
            "(with_range(start, end) reads [start, end))."
        )
    if lost:
        raise AssertionError(
            f"{reader} drops records at the ends of the range it is given: {read_as} "
            f"lost {sum(lost.values())} record(s) that [{low}, {high}) read whole has (e.g. "
            f"{list(lost)[:3]}). Read from the start position up to the end position of "
            "each range, its first and last record included."
        )


def _range_reading_method(source: Source[Any, Any], reader: Any) -> str:
    """The method that reads a range: the reader's ``fetch``, or the ``read_range`` that an
    incremental table's reader calls."""
    if isinstance(source, IncrementalTableSource):
        return f"{type(source).__name__}.read_range"
    return f"{type(reader).__name__}.fetch"


def check_enumerator_checkpoint(context: ConformanceContext, options: Mapping[str, Any]) -> None:
    """An enumerator restored from a snapshot taken after it handed out a split hands out the
    splits it still had, and not that one; the failure says whether ``snapshot_state`` or
    ``restore_enumerator`` is wrong."""
    source = source_of(context, options)
    serializer = source.enumerator_state_serializer()
    stream = EnumeratorContext(ReadMode.STREAM)
    enumerator = _started(source.create_enumerator(stream))
    try:
        before = frame(serializer, enumerator.snapshot_state(0))
        handed = list(enumerator.next_splits(1))
        if not handed:
            return  # nothing to hand out: nothing to check
        after = frame(serializer, enumerator.snapshot_state(1))
        pending = _drain(enumerator)
    finally:
        enumerator.close()
    restored = _started(source.restore_enumerator(stream, unframe(serializer, after, "a state")))
    try:
        again = _drain(restored)
    finally:
        restored.close()
    _check_restored(source, handed[0].split_id, before == after, pending, again)


def _check_restored(
    source: Source[Any, Any],
    handed: str,
    state_unchanged: bool,
    pending: Sequence[str],
    again: Sequence[str],
) -> None:
    name = type(source).__name__
    if handed in again and state_unchanged:
        raise AssertionError(
            f"snapshot_state does not record that next_splits handed out split {handed}: the "
            "state after handing it out equals the state before, so a restored enumerator "
            "hands it out again while it is being read. Leave the splits handed out out of "
            "the state."
        )
    if handed in again:
        raise AssertionError(
            f"{name}.restore_enumerator hands out split {handed} again, which the state it "
            "was given had handed out (the state changed when the split was handed out). "
            "Restore only the pending splits the state holds."
        )
    missing = sorted(set(pending) - set(again))
    if missing:
        raise AssertionError(
            f"a restored enumerator does not hand out the pending split(s) {missing[:5]} that "
            "the snapshotted one still had: snapshot_state leaves them out, or "
            f"{name}.restore_enumerator drops them (and discovery does not find them again)."
        )


def _started(enumerator: SplitEnumerator[Any, Any]) -> SplitEnumerator[Any, Any]:
    """``enumerator`` started, with one discovery handled if it discovers."""
    enumerator.start()
    if isinstance(enumerator, PeriodicSplitEnumerator):
        enumerator.handle_discovered_splits(enumerator.discover_more_splits())
    return enumerator


def _drain(enumerator: SplitEnumerator[Any, Any]) -> list[str]:
    """The ids of every split ``enumerator`` hands out now."""
    ids: list[str] = []
    for _ in range(_ROUNDS):
        ids += [split.split_id for split in enumerator.next_splits()]
    return ids
