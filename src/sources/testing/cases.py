"""The checks behind the cases of :mod:`sources.testing.conformance`, one function each."""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import HealthCheck, given, settings

from enumerators.base import EnumeratorContext, PeriodicSplitEnumerator, ReadMode
from enumerators.runtime.offsets import SplitProgress, StreamOffset, split_deriver
from readers.base import SplitReader, SplitsAddition
from sources.api import Source
from sources.errors import SerializationError
from sources.serialization import SimpleVersionedSerializer, frame, unframe
from sources.spark import register
from sources.spark.partitions import arrow_schema
from sources.split import Boundedness, SourceSplit
from sources.testing.context import ConformanceContext, assert_same_rows
from sources.testing.jobs import Job
from sources.testing.planning import (
    logged,
    next_batch,
    partition_splits,
    stream_reader,
)
from sources.testing.reading import read_all
from sources.testing.streams import SinkStream, last_batch, plain, records_of

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy
    from pyspark.sql import SparkSession


__all__ = [
    "JOB_TIMEOUT",
    "ONE_SPLIT_PER_TRIGGER",
    "SPLITS",
    "WAKEUP_LATENCY",
    "Contract",
    "Diagnose",
    "Diagnosis",
    "GoldenFile",
    "append_everywhere",
    "assert_same_rows",
    "check_bounded_read",
    "check_exactly_once",
    "check_positions_in_offsets",
    "check_round_trips",
    "check_same_initial_offset",
    "check_wakeups",
    "golden_files",
    "mid_batch",
    "rows_of",
    "scaled",
    "sink_stream",
    "source_of",
    "stream_test_options",
    "wait_for_job",
    "without",
]

SPLITS = 4
"""Splits of the input of the multi-split cases."""
JOB_TIMEOUT = 300.0
"""Longest wait for a driver process to start, reach a point, or finish."""
WAKEUP_LATENCY = 1.0
"""Seconds within which a woken ``fetch`` must return."""
ONE_SPLIT_PER_TRIGGER = {"maxSplitsPerTrigger": 1}
"""Admission that keeps splits pending in the enumerator's checkpoints, whatever limits the
author's ``stream_options`` set: what a checkpoint that forgets pending splits loses."""
_LONG_FETCH = 30.0
"""The timeout given to the fetches that a wakeup must cut short."""
_BEYOND = 1_000_000
"""Positions past the readable end that the blocked-fetch check asks a reader for: the one
way to make any reader wait. The framework never plans such a range (its ends are positions
the enumerator vouched for), so a reader may refuse it as lost data instead of waiting."""
_SETTLE = 0.5
"""Seconds a blocked-fetch check lets a fetch start waiting before it wakes it."""


def rows_of(context: ConformanceContext, records: Iterable[Mapping[str, Any]]) -> list[Hashable]:
    """The rows the context compares, one per record read."""
    return [context.row({key: plain(value) for key, value in r.items()}) for r in records]


def source_of(context: ConformanceContext, options: Mapping[str, Any]) -> Source[Any, Any]:
    """The source as ``load()`` builds it from ``options``."""
    given = {key: str(value) for key, value in options.items()}
    source, _ = context.source_class.from_spark_options(given)
    return source


def check_bounded_read(
    context: ConformanceContext, spark: SparkSession, options: Mapping[str, Any]
) -> None:
    """``read_all`` and a bounded ``spark.read`` with ``options`` give the expected rows."""
    check_exactly_once(context, read_all(context.source_class, options).to_pylist(), _BOUNDED)
    register(spark, context.source_class)
    given = {key: str(value) for key, value in options.items()}
    frame_ = spark.read.format(context.source_class.format_name()).options(**given).load()
    check_exactly_once(context, records_of(frame_.collect()), _BOUNDED)


@dataclass(frozen=True)
class Contract:
    """What a case holds a source to, and the likely cause of each way it can fail."""

    promise: str
    if_lost: str
    """The likely cause when rows are missing."""
    if_repeated: str
    """The likely cause when rows are read twice (or rows read were never expected)."""


@dataclass(frozen=True)
class Diagnosis:
    """What a look without Spark found after a case failed (:mod:`.diagnosis`)."""

    where: str
    """Which records of which splits were lost or repeated."""
    evidence: str | None
    """The first line of a check without Spark that fails on the same input, naming a
    method; ``None`` when they all pass."""


Diagnose = Callable[[Counter[Hashable], Counter[Hashable]], Diagnosis]
"""Looks for where the lost and the repeated rows are, once a case failed."""


def check_exactly_once(
    context: ConformanceContext,
    records: Iterable[Mapping[str, Any]],
    contract: Contract,
    diagnose: Diagnose | None = None,
) -> None:
    """The context's check of ``records``; a failure also says the broken ``contract`` and
    the likely cause of what was seen: rows lost, rows repeated, or both. With
    ``diagnose``, it also says where the wrong rows are, and names a cause as likely only
    when a check without Spark points to it."""
    rows = rows_of(context, records)
    try:
        context.check_rows(rows)
    except AssertionError as error:
        lost: Counter[Hashable] = Counter()
        repeated: Counter[Hashable] = Counter()
        with contextlib.suppress(NotImplementedError):
            found, wanted = Counter(rows), Counter(context.expected_rows())
            lost, repeated = wanted - found, found - wanted
        causes = [
            cause
            for cause, seen in ((contract.if_lost, lost), (contract.if_repeated, repeated))
            if seen
        ] or [contract.if_lost, contract.if_repeated]
        said = f"{error}\nContract: {contract.promise}"
        if diagnose is None or not (lost or repeated):
            raise AssertionError(f"{said}\nLikely cause: {' Or: '.join(causes)}") from None
        seen = diagnose(lost, repeated)
        cause = (
            f"Likely cause: {seen.evidence}"
            if seen.evidence is not None
            else "Possible causes (the checks without Spark pass on this input, so none is "
            f"certain): {' Or: '.join(causes)}"
        )
        raise AssertionError(f"{said}\nWhere: {seen.where}\n{cause}") from None


_BOUNDED = Contract(
    "a bounded read gives every record of every split once.",
    if_lost="the split reader stops before a split's end position, drops a range's last "
    "record, or reports a split finished early (fetch; the split_ranges case checks ranges "
    "without Spark); or the enumerator hands out fewer splits than the input has.",
    if_repeated="the split reader reads past a split's end position (fetch), or the "
    "enumerator hands out a split twice.",
)


def sink_stream(context: ConformanceContext, spark: SparkSession, directory: Path) -> SinkStream:
    """A stream of the context's source into a parquet sink under ``directory``."""
    register(spark, context.source_class)
    return SinkStream(spark, context.source_class.format_name(), directory)


def append_everywhere(context: ConformanceContext, splits: int) -> None:
    """More test records into each of ``splits`` splits, if the input grows."""
    for split in range(splits):
        context.append(split)


def scaled(options: Mapping[str, Any], factor: float) -> dict[str, Any]:
    """``options`` with each integer value times ``factor`` (at least 1)."""
    return {
        key: max(1, int(value * factor)) if isinstance(value, int) else value
        for key, value in options.items()
    }


def without(options: Mapping[str, Any], removed: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` without the keys of ``removed``."""
    return {key: value for key, value in options.items() if key not in removed}


def stream_test_options(context: ConformanceContext, directory: Path) -> dict[str, Any]:
    """Options of a stream over a new input of ``SPLITS`` splits, in small batches, with its
    state in ``directory``."""
    return {
        **context.create_input(SPLITS),
        **context.stream_options,
        "stateLocation": str(directory / "state"),
    }


def mid_batch(checkpoint: Path) -> bool:
    """Whether a micro-batch is logged but not committed, after at least one was committed."""
    committed = last_batch(checkpoint / "commits")
    return committed >= 0 and last_batch(checkpoint / "offsets") > committed


def wait_for_job(job: Job, condition: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll ``condition`` every few milliseconds while ``job`` runs."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert job.running(), f"the job ended before {what}\n{job.tail()}"
        assert time.monotonic() < deadline, f"no {what} within {timeout:.0f}s\n{job.tail()}"
        time.sleep(0.005)


def check_round_trips(
    serializer: SimpleVersionedSerializer[Any], values: SearchStrategy[Any], what: str
) -> None:
    """Every value of ``values`` survives frame and unframe, and frames the same twice."""

    @settings(
        max_examples=100,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.differing_executors],
    )
    @given(value=values)
    def round_trip(value: Any) -> None:
        data = frame(serializer, value)
        assert unframe(serializer, data, what) == value
        assert frame(serializer, value) == data, f"{what} framed to other bytes the second time"

    round_trip()


def check_positions_in_offsets(source: Source[Any, Any], splits: SearchStrategy[Any]) -> None:
    """Every split of ``splits``, in flight at its start and at its end position, survives an
    offset's trip through Spark's offset log (JSON): positions are integers of any size."""
    serializer = source.split_serializer()

    @settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(split=splits)
    def round_trip(split: SourceSplit) -> None:
        end = split.end_position()
        for position in (
            split.start_position(),
            split.start_position() + 1 if end is None else end,
        ):
            if not isinstance(position, int) or isinstance(position, bool):
                raise AssertionError(
                    f"{type(split).__name__} gave the position {position!r}; positions are "
                    "integers (of any size: pack an ID of two numbers as one, such as "
                    "ms << 64 | seq)"
                )
            offset = StreamOffset(
                1, {split.split_id: SplitProgress(frame(serializer, split), position)}
            )
            again = StreamOffset.from_json(logged(offset.to_json()), source.format_name())
            assert again.splits == offset.splits, (
                f"split {split!r} at {position} changed in an offset"
            )

    round_trip()


def check_same_initial_offset(
    source: Source[Any, Any], first: Mapping[str, Any], again: Mapping[str, Any], when: str
) -> None:
    """Fail, saying why it matters, unless the initial offset ``again`` (of a new driver,
    ``when``) equals the ``first``; both are shown decoded, not as base64."""
    if again == first:
        return
    raise AssertionError(
        f"The initial offset of a new driver {when} differs from the first driver's: the "
        "enumerator's initial state depends on time or randomness (a clock, a uuid, random "
        "numbers, the order of a set or of an unsorted listing). Until a batch is logged, "
        "Spark asks a restarted query's initialOffset() again, and it must give the same "
        "offset from the same options and input.\n"
        f"  first: {_readable_offset(source, first)}\n"
        f"  again: {_readable_offset(source, again)}"
    )


def _readable_offset(source: Source[Any, Any], offset: Mapping[str, Any]) -> str:
    """``offset`` with its state and splits decoded by the source's serializers."""
    decoded = StreamOffset.from_json(offset, source.format_name(), split_deriver(source))
    state: Any = decoded.state_ref
    if decoded.inline_state is not None:
        state = unframe(source.enumerator_state_serializer(), decoded.inline_state, "a state")
    if decoded.splits_ref is not None:
        return f"state {state!r}, {decoded.split_count} splits in flight in the state store"
    splits = {
        split_id: (unframe(source.split_serializer(), progress.split, "a split"), progress.position)
        for split_id, progress in decoded.splits.items()
    }
    return f"state {state!r}, splits in flight {splits!r}"


@dataclass(frozen=True)
class GoldenFile:
    """The golden files of one serializer: ``<prefix>_<kind>_v<version>.bin`` in ``directory``."""

    directory: Path
    prefix: str
    kind: str
    serializer: SimpleVersionedSerializer[Any]
    value: Callable[[int], Any]

    def path(self, version: int) -> Path:
        return self.directory / f"{self.prefix}_{self.kind}_v{version}.bin"

    def check_current(self) -> Path | None:
        """Check today's version's file; write it if it is missing and return its path."""
        version = self.serializer.version
        path = self.path(version)
        written = not path.exists()
        if written:
            self.directory.mkdir(parents=True, exist_ok=True)
            path.write_bytes(frame(self.serializer, self.value(version)))
        self.check(version)
        return path if written else None

    def check_every_version(self) -> list[Path]:
        """Check the files of every version there is, today's included (a layout changed
        without a version bump shows there); return their paths."""
        there = [v for v in range(1, self.serializer.version + 1) if self.path(v).exists()]
        for version in there:
            self.check(version)
        return [self.path(v) for v in there]

    def check(self, version: int) -> None:
        """The file of ``version`` reads, with today's serializer, as the golden value of
        ``version``; fail saying which likely cause applies."""
        path = self.path(version)
        expected = self.value(version)
        try:
            value = unframe(self.serializer, path.read_bytes(), f"the golden file {path}")
        except SerializationError as error:
            value = error
        if value == expected:
            return
        current = self.serializer.version
        if version == current:
            cause = (
                f"the {self.kind} serializer's layout changed without a version bump: raise its "
                f"version to {current + 1} and keep reading version {current} in deserialize"
            )
        elif isinstance(value, SerializationError):
            cause = (
                f"the {self.kind} serializer (version {current}) no longer reads its version "
                f"{version}: keep reading version {version} in deserialize"
            )
        else:
            cause = (
                f"the {self.kind} serializer (version {current}) reads its version {version} "
                f"otherwise than golden_{self.kind}({version}) says; if that version "
                f"legitimately reads so (a field added since takes its default there), return "
                f"that value from golden_{self.kind}({version})"
            )
        raise AssertionError(
            f"{path} reads as {value!r}, not {expected!r}: {cause} (or golden_{self.kind}"
            f"({version}) changed; a golden file is never regenerated)"
        )


def golden_files(context: ConformanceContext) -> list[GoldenFile]:
    """The split's and the state's golden files of the context's source."""

    directory = context.golden_directory
    if directory is None:
        pytest.skip("the context names no golden_directory")
    source = source_of(context, context.create_input(1))
    prefix = context.golden_prefix or context.source_class.name
    return [
        GoldenFile(directory, prefix, "split", source.split_serializer(), context.golden_split),
        GoldenFile(
            directory,
            prefix,
            "state",
            source.enumerator_state_serializer(),
            context.golden_state,
        ),
    ]


def check_wakeups(context: ConformanceContext, options: Mapping[str, Any]) -> None:
    """The wakeup contract of the source's split reader, on its first micro-batch's ranges."""
    driver = stream_reader(context.source_class, options)
    try:
        start = logged(driver.initialOffset())
        end = next_batch(driver, start)
        ranges = partition_splits(driver, driver.partitions(start, end))
        source = driver.source
        schema = arrow_schema(driver.schema)
        records = _read_woken(source.create_reader(schema), ranges)
        undisturbed = read_all_of(source.create_reader(schema), ranges)
        assert_same_rows(rows_of(context, records), rows_of(context, undisturbed))
    finally:
        driver.stop()
    waiting = _waiting_split(source)  # its own enumerator, once the driver's is closed
    if waiting is not None:
        _check_blocked_fetch(source.create_reader(schema), waiting)


def read_all_of(reader: SplitReader[Any], splits: Sequence[SourceSplit]) -> list[dict[str, Any]]:
    """Every record ``reader`` reads from ``splits``, fetch after fetch; then it is closed."""
    try:
        return _fetch_all(reader, splits, _LONG_FETCH / 2)
    finally:
        reader.close()


def _fetch_all(
    reader: SplitReader[Any], splits: Sequence[SourceSplit], longest: float
) -> list[dict[str, Any]]:
    """Fetch until every split of ``splits`` is finished; no fetch may take ``longest``."""
    unfinished = {split.split_id for split in splits}
    records: list[dict[str, Any]] = []
    reader.handle_splits_changes(SplitsAddition(list(splits)))
    deadline = time.monotonic() + JOB_TIMEOUT
    while unfinished:
        assert time.monotonic() < deadline, f"splits {sorted(unfinished)} never finished"
        started = time.monotonic()
        fetched = reader.fetch(_LONG_FETCH)
        took = time.monotonic() - started
        if took >= longest:
            raise AssertionError(_slow_fetch(reader, took, longest))
        for batches in fetched.batches.values():
            for batch in batches:
                records.extend(batch.to_pylist())
        unfinished -= fetched.finished
    return records


def _slow_fetch(reader: SplitReader[Any], took: float, longest: float) -> str:
    said = f"{type(reader).__name__}.fetch took {took:.2f}s, more than {longest:.2f}s"
    if longest > WAKEUP_LATENCY:
        return said
    return f"{said}, with wakeup() called every few milliseconds; {_WAKEUP_CONTRACT}"


def _read_woken(reader: SplitReader[Any], splits: Sequence[SourceSplit]) -> list[dict[str, Any]]:
    """Read ``splits`` on another thread with a wakeup before the first fetch and every few
    milliseconds after; each fetch must return within ``WAKEUP_LATENCY``."""
    result: list[dict[str, Any]] = []
    failure: list[BaseException] = []

    def read() -> None:
        try:
            result.extend(_fetch_all(reader, splits, WAKEUP_LATENCY))
        except BaseException as error:
            failure.append(error)

    try:
        reader.wakeup()  # before any fetch: the first must not wait
        thread = threading.Thread(target=read, name="wakeup-check", daemon=True)
        thread.start()
        while thread.is_alive():
            reader.wakeup()
            thread.join(0.02)
    finally:
        reader.close()
    if failure and isinstance(failure[0], AssertionError):
        raise failure[0]
    if failure:
        raise AssertionError(f"reading with wakeups failed: {failure[0]!r}") from failure[0]
    return result


def _waiting_split(source: Source[Any, Any]) -> SourceSplit | None:
    """A range past what an unbounded split can read now (a fetch of it waits, or fails as
    for lost records), if the source streams unbounded splits."""
    if Boundedness.CONTINUOUS_UNBOUNDED not in source.supported_boundedness:
        return None
    enumerator = source.create_enumerator(EnumeratorContext(ReadMode.STREAM))
    enumerator.start()
    try:
        if isinstance(enumerator, PeriodicSplitEnumerator):
            enumerator.handle_discovered_splits(enumerator.discover_more_splits())
        unbounded = [s for s in enumerator.next_splits() if s.end_position() is None]
        if not unbounded:
            return None
        split = unbounded[0]
        readable = enumerator.latest_positions([split])[split.split_id]
        waiting: SourceSplit = split.with_range(readable, readable + _BEYOND)
        return waiting
    finally:
        enumerator.close()


def _check_blocked_fetch(reader: SplitReader[Any], split: SourceSplit) -> None:
    """A fetch of a range past the records that exist either ends by itself (it fails, as
    for lost records, or returns) before a wakeup, or returns within ``WAKEUP_LATENCY`` of
    one, without failing."""
    returned = threading.Event()
    failure: list[BaseException] = []

    def fetch() -> None:
        try:
            reader.fetch(_LONG_FETCH)
        except BaseException as error:
            failure.append(error)
        finally:
            returned.set()

    try:
        reader.handle_splits_changes(SplitsAddition([split]))
        thread = threading.Thread(target=fetch, name="blocked-fetch", daemon=True)
        thread.start()
        if returned.wait(_SETTLE):
            return  # it did not wait: nothing to wake
        woken = time.monotonic()
        reader.wakeup()
        name = f"{type(reader).__name__}.fetch"
        assert returned.wait(_LONG_FETCH), f"{name} ignored wakeup(): {_WAKEUP_CONTRACT}"
        took = time.monotonic() - woken
        assert not failure, f"{name} failed when woken, instead of returning: {failure[0]!r}"
        assert took < WAKEUP_LATENCY, (
            f"{name} returned {took:.2f}s after wakeup(), waiting for records past the "
            f"readable end of split {split.split_id}; {_WAKEUP_CONTRACT}"
        )
    finally:
        reader.close()


_WAKEUP_CONTRACT = (
    f"a blocked fetch must return within {WAKEUP_LATENCY:g}s of wakeup() (SplitReader.wakeup's "
    "contract: Spark wakes a reader to end a task or stop a query). Wait on something wakeup() "
    "interrupts: a threading.Event it sets, the client's own wakeup, or polls of at most "
    f"{WAKEUP_LATENCY:g}s that check a flag wakeup() sets"
)
