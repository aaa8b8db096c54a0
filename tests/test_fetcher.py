"""The executor-side reader runtime, driven directly: wakeup, cancel, close, memory bound."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from itertools import pairwise

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from readers import FetcherSettings, RecordsBySplit, SplitFetcher, SplitReader, SplitsAddition
from readers.arrow import BatchAssembler
from readers.memory import CHOSEN_BY_USER
from readers.numbers.reader import NumberSequenceSplitReader
from sources import ReaderError, SchemaMismatchError, SplitSourceError
from sources.numbers.splits import NumberSequenceSplit

SCHEMA = pa.schema([pa.field("value", pa.int64(), nullable=False)])

BOTH_THREADINGS = pytest.mark.parametrize(
    "read_ahead", [0, 4], ids=["on the caller's thread", "read ahead on a thread"]
)
"""``queue_capacity`` 0 reads on the iterating thread, more on a fetcher thread."""


class WaitingReader(SplitReader[NumberSequenceSplit]):
    """Blocks in fetch until its timeout or a wakeup, like a reader waiting on a quiet broker."""

    def __init__(self) -> None:
        self.woken = threading.Event()
        self.fetch_returned_at: list[float] = []
        self.closed = 0

    def handle_splits_changes(self, change: SplitsAddition[NumberSequenceSplit]) -> None:
        pass

    def fetch(self, timeout: float) -> RecordsBySplit:
        self.woken.wait(timeout)
        self.woken.clear()
        self.fetch_returned_at.append(time.monotonic())
        return RecordsBySplit()

    def wakeup(self) -> None:
        self.woken.set()

    def close(self) -> None:
        self.closed += 1


class CountingReader(NumberSequenceSplitReader):
    """The numbers reader, counting fetches and closes; fails on fetch ``fail_at`` if set."""

    def __init__(self, fail_at: int | None = None) -> None:
        super().__init__()
        self.fetches = 0
        self.finished = 0
        self.closed = 0
        self.fail_at = fail_at

    def fetch(self, timeout: float) -> RecordsBySplit:
        self.fetches += 1
        if self.fetches == self.fail_at:
            raise ConnectionResetError("peer went away")
        return super().fetch(timeout)

    def finish(self) -> None:
        self.finished += 1

    def close(self) -> None:
        self.closed += 1


def splits(*ranges: tuple[int, int]) -> list[NumberSequenceSplit]:
    return [NumberSequenceSplit(i, start, end) for i, (start, end) in enumerate(ranges)]


def iterate_in_thread(fetcher: SplitFetcher[NumberSequenceSplit]) -> tuple[threading.Thread, list]:
    outcome: list = []

    def consume() -> None:
        try:
            outcome.extend(fetcher)
        except BaseException as error:
            outcome.append(error)

    thread = threading.Thread(target=consume)
    thread.start()
    return thread, outcome


@BOTH_THREADINGS
def test_reads_all_splits_on_one_thread_in_bounded_batches(read_ahead: int) -> None:
    reader = CountingReader()
    fetcher = SplitFetcher(
        lambda: reader,
        splits((0, 99_999), (100_000, 100_009), (100_010, 250_000)),
        SCHEMA,
        FetcherSettings(max_records_per_batch=3_000, queue_capacity=read_ahead),
    )

    batches = list(fetcher)

    values = pa.concat_arrays([batch.column(0) for batch in batches]).to_pylist()
    assert sorted(values) == list(range(250_001))
    # Fetches over the bound are cut, each topping up the rows left over before it.
    assert [batch.num_rows for batch in batches[:-1]] == [3_000] * (len(batches) - 1)
    assert all(batch.schema.equals(SCHEMA) for batch in batches)
    assert (reader.finished, reader.closed) == (1, 1)


def test_batches_respect_the_byte_bound() -> None:
    fetcher = SplitFetcher(
        NumberSequenceSplitReader,
        splits((0, 199_999)),
        SCHEMA,
        FetcherSettings(max_bytes_per_batch=64_000),
    )

    batches = list(fetcher)

    assert sum(batch.num_rows for batch in batches) == 200_000
    assert max(batch.nbytes for batch in batches) <= 64_000


@BOTH_THREADINGS
def test_cancel_wakes_a_fetch_blocked_on_a_long_timeout_within_100ms(read_ahead: int) -> None:
    reader = WaitingReader()
    settings = FetcherSettings(fetch_timeout=30.0, queue_capacity=read_ahead)
    fetcher = SplitFetcher(lambda: reader, splits((0, 9)), SCHEMA, settings)
    thread, outcome = iterate_in_thread(fetcher)
    time.sleep(0.3)

    cancelled_at = time.monotonic()
    fetcher.cancel()
    thread.join(5)

    assert reader.fetch_returned_at[-1] - cancelled_at < 0.1
    assert not thread.is_alive()
    assert isinstance(outcome[-1], ReaderError)
    assert "was cancelled" in str(outcome[-1])
    assert reader.closed == 1


def test_a_cancelled_read_stops_within_the_shutdown_bound_even_if_wakeup_is_ignored() -> None:
    class DeafReader(WaitingReader):
        def wakeup(self) -> None:
            pass

    reader = DeafReader()
    settings = FetcherSettings(fetch_timeout=3.0, shutdown_timeout=0.5)
    fetcher = SplitFetcher(lambda: reader, splits((0, 9)), SCHEMA, settings)
    thread, outcome = iterate_in_thread(fetcher)
    time.sleep(0.2)

    started = time.monotonic()
    fetcher.cancel()
    thread.join(5)

    assert time.monotonic() - started < 1.0
    assert isinstance(outcome[-1], ReaderError)


@BOTH_THREADINGS
def test_the_reader_runs_on_the_fetcher_thread_only_when_it_reads_ahead(read_ahead: int) -> None:
    threads = []

    class WhereReader(CountingReader):
        def fetch(self, timeout: float) -> RecordsBySplit:
            threads.append(threading.current_thread())
            return super().fetch(timeout)

    settings = FetcherSettings(max_records_per_batch=10, queue_capacity=read_ahead)
    values = [
        value
        for batch in SplitFetcher(WhereReader, splits((0, 99)), SCHEMA, settings)
        for value in batch.column(0).to_pylist()
    ]

    assert values == list(range(100))
    here = {threading.current_thread()} == set(threads)
    assert here == (read_ahead == 0)


@BOTH_THREADINGS
def test_leaving_the_iteration_early_closes_the_reader(read_ahead: int) -> None:
    reader = CountingReader()
    settings = FetcherSettings(queue_capacity=read_ahead)
    fetcher = SplitFetcher(lambda: reader, splits((0, 10**9)), SCHEMA, settings)
    iterator: Iterator[pa.RecordBatch] = iter(fetcher)

    next(iterator)
    iterator.close()  # type: ignore[attr-defined]

    assert reader.closed == 1
    assert reader.finished == 0


@BOTH_THREADINGS
def test_a_failing_fetch_surfaces_with_the_split_ids_and_still_closes(read_ahead: int) -> None:
    reader = CountingReader(fail_at=3)
    settings = FetcherSettings(queue_capacity=read_ahead)
    fetcher = SplitFetcher(lambda: reader, splits((0, 10**7)), SCHEMA, settings)

    with pytest.raises(ReaderError, match=r"Reading splits \[0\] failed: ConnectionResetError"):
        list(fetcher)

    assert reader.closed == 1
    assert reader.finished == 0


class BadClose(CountingReader):
    def close(self) -> None:
        raise OSError("could not release the lease")


@BOTH_THREADINGS
def test_a_failing_close_after_a_clean_read_is_reported(read_ahead: int) -> None:
    settings = FetcherSettings(queue_capacity=read_ahead)
    with pytest.raises(ReaderError, match="could not release the lease"):
        list(SplitFetcher(BadClose, splits((0, 99)), SCHEMA, settings))


@BOTH_THREADINGS
def test_a_failing_close_after_a_failed_read_leaves_the_read_s_failure_first(
    read_ahead: int, caplog: pytest.LogCaptureFixture
) -> None:
    settings = FetcherSettings(queue_capacity=read_ahead)
    fetcher = SplitFetcher(lambda: BadClose(fail_at=2), splits((0, 10**7)), SCHEMA, settings)

    with pytest.raises(ReaderError, match="ConnectionResetError: peer went away"):
        list(fetcher)

    assert "could not release the lease" in caplog.text


def test_the_queue_bound_holds_whatever_the_input_size() -> None:
    reader = CountingReader()
    capacity = 2
    settings = FetcherSettings(max_records_per_batch=1 << 16, queue_capacity=capacity)
    fetcher = SplitFetcher(lambda: reader, splits((0, 10**12)), SCHEMA, settings)
    iterator = iter(fetcher)

    for consumed in range(1, 6):
        next(iterator)
        time.sleep(0.3)  # a slow consumer: the fetcher must wait, not buffer ahead
        # one chunk per fetch; at most `capacity` queued plus one blocked in put
        assert reader.fetches - consumed <= capacity + 1
    iterator.close()  # type: ignore[attr-defined]


def test_batches_are_cast_to_the_declared_schema() -> None:
    class IntReader(NumberSequenceSplitReader):
        def fetch(self, timeout: float) -> RecordsBySplit:
            fetched = super().fetch(timeout)
            narrowed = {
                split_id: [
                    pa.RecordBatch.from_pydict(
                        {"extra": [1] * b.num_rows, "value": b.column(0).cast(pa.int32())}
                    )
                    for b in batches
                ]
                for split_id, batches in fetched.batches.items()
            }
            return RecordsBySplit(narrowed, fetched.finished)

    batches = list(SplitFetcher(IntReader, splits((0, 999)), SCHEMA, FetcherSettings()))

    assert all(batch.schema.equals(SCHEMA) for batch in batches)
    assert sum(batch.num_rows for batch in batches) == 1000


@BOTH_THREADINGS
def test_nulls_in_a_not_null_column_are_refused(read_ahead: int) -> None:
    class NullReader(NumberSequenceSplitReader):
        def fetch(self, timeout: float) -> RecordsBySplit:
            fetched = super().fetch(timeout)
            nulls = {sid: [pa.record_batch({"value": [1, None]})] for sid in fetched.batches}
            return RecordsBySplit(nulls, fetched.finished)

    settings = FetcherSettings(queue_capacity=read_ahead)
    with pytest.raises(SchemaMismatchError, match="1 null values in column 'value'"):
        list(SplitFetcher(NullReader, splits((0, 9)), SCHEMA, settings))


def test_reads_up_to_the_largest_long_without_overflow() -> None:
    largest = (1 << 63) - 1
    batches = list(
        SplitFetcher(
            NumberSequenceSplitReader, splits((largest - 4, largest)), SCHEMA, FetcherSettings()
        )
    )

    assert batches[0].column(0).to_pylist() == list(range(largest - 4, largest + 1))


def test_two_splits_with_one_id_in_a_task_fail_naming_the_id() -> None:
    twins = [NumberSequenceSplit(7, 0, 99), NumberSequenceSplit(7, 100, 199)]
    with pytest.raises(SplitSourceError, match="Two splits with the id '7' in one task"):
        SplitFetcher(NumberSequenceSplitReader, twins, SCHEMA, FetcherSettings())


@given(
    sizes=st.lists(st.integers(min_value=0, max_value=25), max_size=30),
    limit=st.integers(min_value=1, max_value=12),
)
def test_the_assembler_cuts_only_batches_over_the_limit_and_joins_only_neighbours_that_fit(
    sizes: list[int], limit: int
) -> None:
    assembler = BatchAssembler(SCHEMA, max_rows=limit, max_bytes=1 << 30)
    starts = [sum(sizes[:index]) for index in range(len(sizes))]
    batches = [
        pa.record_batch([pa.array(range(start, start + size), pa.int64())], schema=SCHEMA)
        for start, size in zip(starts, sizes, strict=True)
    ]

    out = [ready for batch in batches for ready in assembler.add(batch)] + assembler.flush()

    values = [value for batch in out for value in batch.column(0).to_pylist()]
    assert values == list(range(sum(sizes)))
    assert all(0 < batch.num_rows <= limit for batch in out)
    # A batch within the limit reaches Spark whole: no output batch starts inside it.
    out_starts = {batch.column(0)[0].as_py() for batch in out}
    for start, size in zip(starts, sizes, strict=True):
        inside = set(range(start + 1, start + size))
        assert size > limit or not inside & out_starts, (start, size)
    # Neighbours are joined while they fit: no two consecutive outputs would fit in one.
    assert all(before.num_rows + after.num_rows > limit for before, after in pairwise(out))


@pytest.mark.parametrize("chosen", [None, "mimalloc"])
def test_a_read_moves_pyarrow_off_mimalloc_unless_the_user_chose_the_pool(
    monkeypatch: pytest.MonkeyPatch, chosen: str | None
) -> None:
    before = pa.default_memory_pool()
    pa.set_memory_pool(pa.mimalloc_memory_pool())
    if chosen is None:
        monkeypatch.delenv(CHOSEN_BY_USER, raising=False)
    else:
        monkeypatch.setenv(CHOSEN_BY_USER, chosen)
    try:
        list(SplitFetcher(NumberSequenceSplitReader, splits((0, 9)), SCHEMA, FetcherSettings()))
        backend = pa.default_memory_pool().backend_name
    finally:
        pa.set_memory_pool(before)

    expected = {"mimalloc"} if chosen else {"jemalloc", "system"}
    assert backend in expected


def test_a_read_on_the_tasks_thread_keeps_pyarrows_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    before = pa.default_memory_pool()
    pa.set_memory_pool(pa.mimalloc_memory_pool())
    monkeypatch.delenv(CHOSEN_BY_USER, raising=False)
    try:
        settings = FetcherSettings(queue_capacity=0)
        list(SplitFetcher(NumberSequenceSplitReader, splits((0, 9)), SCHEMA, settings))
        backend = pa.default_memory_pool().backend_name
    finally:
        pa.set_memory_pool(before)

    assert backend == "mimalloc"
