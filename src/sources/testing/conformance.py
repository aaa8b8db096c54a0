"""The conformance suite: the tests every source should pass, modelled on Flink's
``SourceTestSuiteBase``.

An author subclasses :class:`SourceConformanceSuite` in a pytest module (its
name must start with ``Test``) and gives it a ``context`` fixture that returns a
:class:`ConformanceContext`: which source, how to make test data in ``n``
splits, and which rows to expect. Every case of :class:`Case` then runs
against that source::

    from sources.testing.conformance import Case, ConformanceContext, SourceConformanceSuite


    class NumbersContext(ConformanceContext):
        source_class = NumberSequenceSource
        stream_options = {"maxRecordsPerTrigger": 500}

        def create_input(self, splits):
            self.count = 1_000 * splits
            return {"to": self.count - 1, "splits": splits}

        def expected_rows(self):
            return [(n,) for n in range(self.count)]

        def splits(self):  # hypothesis strategies for the serializer cases
            return st.builds(NumberSequenceSplit, st.integers(0, 9), longs, longs)

        def states(self):
            return st.lists(self.splits())


    class TestNumbers(SourceConformanceSuite):
        unsupported = {Case.OLDER_VERSIONS: "only version 1 exists"}  # skipped, with why

        @pytest.fixture
        def context(self, tmp_path):
            return NumbersContext(tmp_path)

Cases that a source cannot support are declared in ``unsupported`` (case →
reason) and skipped with that reason, never failed. Cases that need a
bounded read are skipped for sources without ``Boundedness.BOUNDED``. The
Spark cases (marked ``spark``) run in the session of the ``spark_session``
fixture, by default the plugin's ``splitsource_spark``. Streams write Spark's
parquet file sink, read back with Spark, whose ``_spark_metadata`` log keeps
only committed files: an exactly-once sink. The driver kill case runs its
first stream in a driver process of its own (:mod:`sources.testing.jobs`),
started standing by with the class's first case so that its JVM starts while
the other cases run.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Mapping
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import pytest
from pyspark.errors import StreamingQueryException

from sources.spark import cancel, register, stop_gracefully
from sources.split import Boundedness
from sources.testing.cases import (
    JOB_TIMEOUT,
    ONE_SPLIT_PER_TRIGGER,
    SPLITS,
    Contract,
    append_everywhere,
    assert_same_rows,
    check_bounded_read,
    check_exactly_once,
    check_positions_in_offsets,
    check_round_trips,
    check_same_initial_offset,
    check_wakeups,
    golden_files,
    mid_batch,
    rows_of,
    scaled,
    sink_stream,
    source_of,
    stream_test_options,
    wait_for_job,
    without,
)
from sources.testing.context import Case, ConformanceContext
from sources.testing.contracts import check_enumerator_checkpoint, check_split_ranges
from sources.testing.diagnosis import diagnose
from sources.testing.faults import kill_once_source
from sources.testing.jobs import Job, job_env, job_settings, workers_import_path
from sources.testing.outages import check_outage
from sources.testing.planning import logged, next_batch, read_partitions, stream_reader
from sources.testing.registration import check_registration
from sources.testing.streams import SinkStream

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["Case", "ConformanceContext", "SourceConformanceSuite", "assert_same_rows"]


class SourceConformanceSuite:
    """Subclass as ``Test<Name>`` with a ``context`` fixture; each case is a test method.

    Declare what the source cannot do in ``unsupported``; override the
    ``spark_session`` fixture to use a session of your own.

    Examples
    --------
    In a pytest module, with the ``NumbersContext`` of :class:`ConformanceContext`'s
    example; pytest then runs a test per case, ``test_<case>``:

    >>> import pytest
    >>> class TestNumbers(SourceConformanceSuite):
    ...     unsupported = {Case.OLDER_VERSIONS: "only version 1 exists"}
    ...
    ...     @pytest.fixture
    ...     def context(self, tmp_path):
    ...         return NumbersContext(tmp_path)
    >>> TestNumbers.test_driver_kill.__name__ == f"test_{Case.DRIVER_KILL.value}"
    True
    """

    unsupported: ClassVar[Mapping[Case, str]] = {}
    """Cases this source cannot support, each with the reason shown when it is skipped."""

    @pytest.fixture
    def context(self) -> ConformanceContext:
        """The context of the source under test: override in the subclass."""
        raise NotImplementedError(
            f"{type(self).__name__} must define a `context` fixture returning a ConformanceContext"
        )

    @pytest.fixture
    def spark_session(self, splitsource_spark: SparkSession) -> SparkSession:
        """The Spark session of the Spark cases: the plugin's ``splitsource_spark``."""
        return splitsource_spark

    def skip_unsupported(self, case: Case, context: ConformanceContext | None = None) -> None:
        """Skip ``case`` if it is declared unsupported, or needs a bounded read the source
        lacks."""
        reason = self.unsupported.get(case)
        if reason is not None:
            pytest.skip(f"{case.value} is declared unsupported: {reason}")
        bounded_cases = (Case.SINGLE_SPLIT, Case.MULTIPLE_SPLITS)
        if (
            context is not None
            and case in bounded_cases
            and Boundedness.BOUNDED not in context.source_class.supported_boundedness
        ):
            pytest.skip(f"{context.source_class.format_name()} does not support spark.read")

    # --- contracts checked without Spark, first: they fail fast and name the method --

    def test_split_ranges(self, context: ConformanceContext, tmp_path: Path) -> None:
        """Each range of a stream's first micro-batch gives the same records read whole and
        read as two halves; where positions count records, one record per position."""
        self.skip_unsupported(Case.SPLIT_RANGES, context)
        check_split_ranges(context, stream_test_options(context, tmp_path))

    def test_enumerator_checkpoint(self, context: ConformanceContext) -> None:
        """An enumerator restored from a snapshot taken after it handed out a split hands out
        the splits it still had, and not that one."""
        self.skip_unsupported(Case.ENUMERATOR_CHECKPOINT, context)
        check_enumerator_checkpoint(context, context.create_input(SPLITS))

    # --- bounded reads --------------------------------------------------------

    @pytest.mark.spark
    def test_single_split(self, context: ConformanceContext, spark_session: SparkSession) -> None:
        """A bounded read of one split gives the expected rows, in Spark and in ``read_all``."""
        self.skip_unsupported(Case.SINGLE_SPLIT, context)
        check_bounded_read(context, spark_session, context.create_input(1))

    @pytest.mark.spark
    def test_multiple_splits(
        self, context: ConformanceContext, spark_session: SparkSession
    ) -> None:
        """A bounded read of several splits gives the expected rows, with every split in one
        task (positions kept per split) and with a task per split."""
        self.skip_unsupported(Case.MULTIPLE_SPLITS, context)
        options = context.create_input(SPLITS)
        for partitions in (1, SPLITS):
            check_bounded_read(context, spark_session, {**options, "numPartitions": partitions})

    @pytest.mark.spark
    def test_idle_reader(
        self, context: ConformanceContext, spark_session: SparkSession, tmp_path: Path
    ) -> None:
        """One split asked for more partitions than it has splits (``numPartitions``), on
        more cores than splits: the idle ones must not disturb the read. Bounded and
        streaming (AvailableNow), each row once."""
        self.skip_unsupported(Case.IDLE_READER, context)
        options = {**context.create_input(1), "numPartitions": SPLITS}
        if Boundedness.BOUNDED in context.source_class.supported_boundedness:
            check_bounded_read(context, spark_session, options)
        stream = sink_stream(context, spark_session, tmp_path)
        stream.run_available_now(options)
        context.check_rows(rows_of(context, stream.records()))

    # --- streams in the session -----------------------------------------------

    @pytest.mark.spark
    def test_stop_and_resume(
        self, context: ConformanceContext, spark_session: SparkSession, tmp_path: Path
    ) -> None:
        """A stream admitting one split per micro-batch (so that splits wait in the
        enumerator's checkpoint) stopped with ``stop_gracefully`` leaves nothing to replay;
        resumed (after more data arrived, if the input grows; in one batch), each row is
        read once."""
        self.skip_unsupported(Case.STOP_AND_RESUME, context)
        limits = {**context.stream_options, **ONE_SPLIT_PER_TRIGGER}
        options = {**context.create_input(SPLITS), **limits}
        stream = sink_stream(context, spark_session, tmp_path)
        query = stream.run_until(options, data_batches=2)
        stop_gracefully(query, stream.state_location, timeout=stream.timeout)
        assert stream.nothing_to_replay(), "a graceful stop left a micro-batch to replay"
        append_everywhere(context, SPLITS)
        resumed = without(options, limits)
        stream.run_available_now(resumed)
        check_exactly_once(
            context,
            stream.records(),
            Contract(
                "a stream stopped and resumed reads each record once.",
                if_lost="snapshot_state leaves out splits not handed out yet (here one split "
                "was admitted per micro-batch, so the others waited in the checkpoint), or "
                "restore_enumerator does not bring them back (the enumerator_checkpoint case "
                "checks both without Spark).",
                if_repeated="the split reader reads past the end of the ranges it is given "
                "(the split_ranges case checks it without Spark), or restore_enumerator hands "
                "out again a split that was being read.",
            ),
            partial(diagnose, context, resumed, tmp_path),
        )

    @pytest.mark.spark
    def test_scale_up_and_down(
        self, context: ConformanceContext, spark_session: SparkSession, tmp_path: Path
    ) -> None:
        """Three runs of one stream, the first two stopped at once (a replay follows), each
        with other partitioning (``numPartitions`` 4, then 1, then ``maxPartitionBytes``) and
        admission options (``stream_options``, then halved, then doubled): each row once."""
        self.skip_unsupported(Case.SCALE_UP_AND_DOWN, context)
        options = context.create_input(SPLITS)
        stream = sink_stream(context, spark_session, tmp_path)
        admission = context.stream_options
        query = stream.run_until({**options, **admission, "numPartitions": 4}, data_batches=2)
        cancel(query)
        scaled_down = {**options, **scaled(admission, 0.5), "numPartitions": 1}
        cancel(stream.run_until(scaled_down, data_batches=1))
        append_everywhere(context, SPLITS)
        last = {**options, **scaled(admission, 2.0), "maxPartitionBytes": 1}
        stream.run_available_now(last)
        check_exactly_once(
            context,
            stream.records(),
            Contract(
                "a micro-batch's ranges read the same records however they are packed into "
                "tasks, and a replayed batch reads its logged ranges again.",
                if_lost="the split reader keeps positions across the splits of one task (here "
                "4, then 1 task, then a task per split), or stops before a range's end.",
                if_repeated="the split reader reads past the end position it was given, or "
                "keeps positions across the splits of one task (here 4, then 1 task, then a "
                "task per split).",
            ),
            partial(diagnose, context, last, tmp_path),
        )

    # --- kills ----------------------------------------------------------------

    @pytest.fixture(scope="class")
    @classmethod
    def standby_driver(
        cls, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
    ) -> Iterator[Job]:
        """A Spark driver process standing by for ``test_driver_kill``'s go file."""
        directory = tmp_path_factory.mktemp("standby-driver")
        env = job_env(workers_import_path(request.config.rootpath))
        job = Job.start({"goFile": str(directory / "go")}, directory / "driver.log", env)
        yield job
        if job.running():
            job.kill()

    @pytest.fixture(scope="class", autouse=True)
    @classmethod
    def start_driver_early(cls, request: pytest.FixtureRequest) -> None:
        """Start ``standby_driver`` with the class's first case when ``test_driver_kill`` will
        run: its JVM starts while the other cases run."""
        wanted = any(
            item.cls is cls and item.name == "test_driver_kill"
            for item in request.session.items
            if isinstance(item, pytest.Function)
        )
        if wanted and Case.DRIVER_KILL not in cls.unsupported:
            request.getfixturevalue("standby_driver")

    @pytest.mark.spark
    def test_driver_kill(
        self,
        context: ConformanceContext,
        spark_session: SparkSession,
        tmp_path: Path,
        standby_driver: Job,
    ) -> None:
        """A driver process (Python and JVM) SIGKILLed while a micro-batch is logged but not
        committed; the restart (in this session) replays it from its logged offsets, and
        reads what arrived meanwhile: each row once."""
        self.skip_unsupported(Case.DRIVER_KILL, context)
        options = {**context.create_input(SPLITS), **context.stream_options}
        stream = sink_stream(context, spark_session, tmp_path)
        settings = job_settings(
            context.source_class,
            {**options, "stateLocation": stream.state_location},
            tmp_path,
            trigger="continuous",
        )
        job = standby_driver
        try:
            job.wait_until_ready(JOB_TIMEOUT)
            job.go(json.dumps(settings))
            wait_for_job(
                job, lambda: mid_batch(stream.checkpoint), JOB_TIMEOUT, "a batch in flight"
            )
        finally:
            job.kill()
        assert mid_batch(stream.checkpoint), "the kill did not land in the middle of a batch"
        append_everywhere(context, SPLITS)
        stream.run_available_now(options)
        check_exactly_once(
            context,
            stream.records(),
            Contract(
                "after a driver is killed, the logged, uncommitted micro-batch is planned "
                "again from its offsets alone, and the restored enumerator goes on from its "
                "checkpoint.",
                if_lost="the enumerator's state (snapshot_state, restore_enumerator) depends "
                "on what the killed driver held in memory, not on the offset.",
                if_repeated="planning depends on what the killed driver held in memory (a "
                "replayed batch read other ranges), or restore_enumerator hands out again a "
                "split that was being read.",
            ),
            partial(diagnose, context, options, tmp_path),
        )

    @pytest.mark.spark
    def test_worker_kill(
        self, context: ConformanceContext, spark_session: SparkSession, tmp_path: Path
    ) -> None:
        """A reader SIGKILLs its Python worker after handing Spark rows. The task fails; Spark
        retries it where the master allows retries, else the query fails and is restarted
        from its checkpoint. Either way the range is read again: each row once."""
        self.skip_unsupported(Case.WORKER_KILL, context)
        marker = tmp_path / "killed"
        killing = kill_once_source(context.source_class, str(marker))
        register(spark_session, killing)
        stream = SinkStream(spark_session, killing.format_name(), tmp_path)
        options = {**context.create_input(SPLITS), **context.stream_options}
        query = stream.start(options, availableNow=True)
        with contextlib.suppress(StreamingQueryException):
            query.awaitTermination(stream.timeout)
        if query.isActive:
            query.stop()
            raise AssertionError(f"the run with a killed worker did not end in {stream.timeout}s")
        assert marker.exists(), "no reader killed its Python worker"
        stream.run_available_now(options)
        check_exactly_once(
            context,
            stream.records(),
            Contract(
                "a retried task reads exactly its range again.",
                if_lost="the split reader resumes from something kept outside the split it is "
                "given (a consumer group's committed offset, a cursor in a shared place).",
                if_repeated="the split reader reads more than its range when it starts again "
                "(it resumes from a position kept outside the split it is given).",
            ),
            partial(diagnose, context, options, tmp_path),
        )

    # --- serializers ----------------------------------------------------------

    def test_serializer_round_trip(self, context: ConformanceContext) -> None:
        """Any split and any state survive frame and unframe, and frame to the same bytes
        twice; any split survives an offset at its start and end positions."""
        self.skip_unsupported(Case.SERIALIZER_ROUND_TRIP, context)
        source = source_of(context, context.create_input(1))
        check_round_trips(source.split_serializer(), context.splits(), "a split")
        check_round_trips(source.enumerator_state_serializer(), context.states(), "a state")
        check_positions_in_offsets(source, context.splits())

    def test_golden_files(self, context: ConformanceContext) -> None:
        """The golden files of today's serializer versions read as the context's golden values;
        a missing one is written (commit it) and the test says so by skipping."""
        self.skip_unsupported(Case.GOLDEN_FILES, context)
        written = [
            path for golden in golden_files(context) if (path := golden.check_current()) is not None
        ]
        if written:
            pytest.skip(
                f"wrote the missing golden files {[str(p) for p in written]}: commit them, "
                "and never regenerate them"
            )

    def test_older_versions(self, context: ConformanceContext) -> None:
        """The golden files of every serializer version, today's included, still read as
        their golden values: what older checkpoints hold stays readable."""
        self.skip_unsupported(Case.OLDER_VERSIONS, context)
        checked = [
            path for golden in golden_files(context) for path in golden.check_every_version()
        ]
        if not checked:
            pytest.skip("no golden file exists yet: run the golden_files case and commit them")

    # --- determinism ----------------------------------------------------------

    def test_deterministic_planning(self, context: ConformanceContext, tmp_path: Path) -> None:
        """The same ``(start, end)`` plans the same partitions and reads the same rows on
        the driver that logged it and, once that driver stopped, on a new one (a source may
        let one driver at a time read its input), for two micro-batches."""
        self.skip_unsupported(Case.DETERMINISTIC_PLANNING, context)
        options = stream_test_options(context, tmp_path)
        driver = stream_reader(context.source_class, options)
        batches: list[tuple[Any, Any, Any, list[dict[str, Any]]]] = []
        try:
            start = logged(driver.initialOffset())
            for _ in range(2):
                end = next_batch(driver, start)
                planned = driver.partitions(start, end)
                assert driver.partitions(start, end) == planned, (
                    "planning the same batch twice differed"
                )
                batches.append((start, end, planned, read_partitions(driver, planned)))
                start = end
        finally:
            driver.stop()
        restarted = stream_reader(context.source_class, options)
        try:
            for start, end, planned, records in batches:
                assert restarted.partitions(start, end) == planned
                assert_same_rows(
                    rows_of(context, read_partitions(restarted, planned)),
                    rows_of(context, records),
                )
        finally:
            restarted.stop()

    def test_deterministic_initial_offset(
        self, context: ConformanceContext, tmp_path: Path
    ) -> None:
        """A new driver's initial offset equals the first one's, also after the first
        micro-batch was planned but not committed. Drivers run one after the other, as
        restarts do."""
        self.skip_unsupported(Case.DETERMINISTIC_INITIAL_OFFSET, context)
        options = stream_test_options(context, tmp_path)
        first = stream_reader(context.source_class, options)
        try:
            initial = logged(first.initialOffset())
        finally:
            first.stop()
        second = stream_reader(context.source_class, options)
        try:
            again = logged(second.initialOffset())
            check_same_initial_offset(second.source, initial, again, "started after it")
            next_batch(second, again)
        finally:
            second.stop()
        restarted = stream_reader(context.source_class, options)
        try:
            again = logged(restarted.initialOffset())
        finally:
            restarted.stop()
        check_same_initial_offset(
            restarted.source, initial, again, "after the first batch was planned, uncommitted"
        )

    # --- the split reader -----------------------------------------------------

    def test_outage(self, context: ConformanceContext, tmp_path: Path) -> None:
        """With the source's system gone for a few seconds (the context's ``outage()``), a
        read cut by it reads on after it with every record once, and a planning call made
        during it answers "nothing new" instead of failing."""
        self.skip_unsupported(Case.OUTAGE, context)
        if context.outage() is None:
            pytest.skip(
                f"{type(context).__name__} has no outage(): give one that makes the source's "
                "system unreachable for a while, to check that a stream waits it out"
            )
        check_outage(context, stream_test_options(context, tmp_path))

    def test_registration(self, context: ConformanceContext) -> None:
        """Spark's lookup of installed ``pyspark_*`` modules, run in a fresh process of its
        workers' interpreter, finds the source, if a module registers it."""
        self.skip_unsupported(Case.REGISTRATION, context)
        reason = check_registration(context.source_class.format_name())
        if reason is not None:
            pytest.skip(reason)

    def test_wakeup_latency(self, context: ConformanceContext, tmp_path: Path) -> None:
        """``wakeup()`` before a fetch makes it return promptly; a fetch in progress returns
        within ``WAKEUP_LATENCY`` of a wakeup, and the next resumes: no row lost or repeated.
        A fetch of an unbounded split's range past its records (which the framework never
        plans) may fail as for lost records; if it waits instead, a wakeup ends the wait."""
        self.skip_unsupported(Case.WAKEUP_LATENCY, context)
        check_wakeups(context, stream_test_options(context, tmp_path))
