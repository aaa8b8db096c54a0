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
from collections.abc import Hashable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, NamedTuple

from enumerators.base import EnumeratorContext, PeriodicSplitEnumerator, ReadMode, SplitEnumerator
from enumerators.record_index import RecordIndex, RecordsWanted
from sources.capabilities import SupportsRecordIndex, counts_records
from sources.incremental_table.source import IncrementalTableSource
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
    records as positions, else as many as the enumerator's ``records_ahead`` counts. Read
    together by one reader, as one Spark task reads them, the ranges give what each gives
    alone."""
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

    with _record_index(source) as index:
        for split in ranges:
            low, high = split.start_position(), split.end_position()
            if high is None or high - low < 2:
                continue  # read whole: no position to cut at
            cut = low + (high - low) // 2
            whole, held = read(split), _held(source, index, split)
            if held is not None and len(whole) < held.records:
                _check_count(reader_name, split, len(whole), held)  # halves would lose alike
            halves = read(split.with_range(low, cut)) + read(split.with_range(cut, high))
            _check_halves(reader_name, split.split_id, (low, cut, high), whole, halves)
            _check_count(reader_name, split, len(whole), held)
    alone = [row for split in ranges for row in read(split)]
    together = rows_of(context, read_all_of(source.create_reader(schema), ranges))
    _check_together(reader_name, [split.split_id for split in ranges], alone, together)


def _check_together(
    reader: str, split_ids: Sequence[str], alone: Sequence[Hashable], together: Sequence[Hashable]
) -> None:
    lost, extra = Counter(alone) - Counter(together), Counter(together) - Counter(alone)
    if not lost and not extra:
        return
    raise AssertionError(
        f"{reader} reads splits {list(split_ids)} differently when one reader is given them "
        f"all, as one Spark task is: {len(together)} records against {len(alone)} read one "
        f"split per reader ({sum(lost.values())} lost, e.g. {list(lost)[:3]}; "
        f"{sum(extra.values())} extra, e.g. {list(extra)[:3]}). Keep a cursor per split: "
        "the position reached in one split must not carry into another."
    )


@contextmanager
def _record_index(source: Source[Any, Any]) -> Iterator[RecordIndex[Any] | None]:
    """A started enumerator of ``source`` that counts the records of a range
    (:class:`~enumerators.record_index.RecordIndex`), if its positions need one."""
    if not isinstance(source, SupportsRecordIndex):
        yield None
        return
    enumerator = source.create_enumerator(EnumeratorContext(ReadMode.STREAM))
    if not isinstance(enumerator, RecordIndex):
        yield None
        return
    enumerator.start()
    try:
        yield enumerator
    finally:
        enumerator.close()


class _Held(NamedTuple):
    """How many records a range holds, and who says so."""

    records: int
    said_by: str
    doubt: str = ""


def _held(
    source: Source[Any, Any], index: RecordIndex[Any] | None, split: SourceSplit
) -> _Held | None:
    """What ``split``'s range holds: its length where positions count records, else what the
    enumerator's ``records_ahead`` counts there; ``None`` when neither can tell."""
    low, high = split.start_position(), split.end_position()
    assert high is not None
    if counts_records(source, split):
        return _Held(high - low, "whose positions count records")
    if index is None:
        return None
    found = index.records_ahead({split.split_id: RecordsWanted(split, low, high, None)})
    return _Held(
        found[split.split_id].records,
        f"where {type(index).__name__}.records_ahead counts them",
        "; or records_ahead miscounts",
    )


def _check_count(reader: str, split: SourceSplit, read: int, held: _Held | None) -> None:
    if held is None or read == held.records:
        return
    raise AssertionError(
        f"{reader} read {read} records of split {split.split_id}'s range "
        f"[{split.start_position()}, {split.end_position()}), {held.said_by}: {held.records} "
        "expected. A reader returns every record from the range's start position up to, "
        f"not including, its end position (check fetch and with_range){held.doubt}."
    )


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
