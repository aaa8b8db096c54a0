"""A registered :class:`~sources.api.Source` as a Python data source, and its bounded read.

``register(spark, MySource)`` makes ``spark.read.format("splitsource.<name>")``
work. On the driver, the data source validates the options at ``load()`` and
plans a bounded read: the enumerator hands out every split, the splits are
packed into partitions, and each partition carries its splits serialized in
the versioned frame. On an executor, ``read`` deserializes them and runs the
reader runtime (:mod:`readers.fetcher`).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Sequence
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    Filter,
    InputPartition,
)
from pyspark.sql.types import StructType

from enumerators.base import EnumeratorContext, PeriodicSplitEnumerator, ReadMode, SplitEnumerator
from sources.api import Source
from sources.capabilities import SupportsFilterPushdown, pin, unpinned
from sources.errors import SplitSourceError, UnsupportedBoundednessError
from sources.spark.checks import check_source_class
from sources.spark.parallelism import driver_cores, session_parallelism
from sources.spark.partitions import SplitPartitionReading, arrow_schema
from sources.spark.plain_errors import shown_plainly
from sources.spark.pushdown import enable_filter_pushdown, pushdown_wanted
from sources.spark.session import check_spark_version, use_this_python
from sources.spark.stream_reader import (
    RefusedStreamReader,
    SplitSourceStreamReader,
    check_stream_options,
)
from sources.split import Boundedness, require_unique_split_ids

__all__ = ["data_source_for", "plan_bounded", "register"]


_PLANNING_ROUNDS_WITHOUT_PROGRESS = 3


def register(spark: SparkSession, *source_classes: type[Source[Any, Any]]) -> None:
    """Make each source readable as ``spark.read.format(<its format name>)``.

    Works with a classic and a Spark Connect session. Checks that Spark is at
    least 4.2, has a classic session's Python workers run this interpreter
    unless the user chose one, turns on filter pushdown for Python data sources
    (:mod:`sources.spark.pushdown`), and records the default parallelism that the
    session's conf tells (:mod:`sources.spark.parallelism`). The packaged sources
    need no call: a ``pyspark_splitsource_<name>`` module registers each, and
    registering one that Spark already found that way does nothing (Spark would
    warn that it replaced it), unless the session's parallelism differs from the
    driver's cores, which only a registration carries.

    Raises
    ------
    UnsupportedSparkVersionError
        If the session runs Spark older than 4.2.
    SourceDefinitionError
        As :func:`data_source_for`.

    Examples
    --------
    Skipped here (it needs a session); section 7 of the connector guide runs it:

    >>> from sources.numbers.source import NumberSequenceSource
    >>> spark = local_session()  # doctest: +SKIP
    >>> register(spark, NumberSequenceSource)  # doctest: +SKIP
    >>> spark.read.format("splitsource.numbers").option("to", 9).load().count()  # doctest: +SKIP
    10
    """
    check_spark_version(spark.version)
    use_this_python(spark)
    enable_filter_pushdown(spark)
    parallelism = session_parallelism(spark)
    for source_class in source_classes:
        data_source = data_source_for(source_class, parallelism)
        name = data_source.name()
        if (
            parallelism in (None, driver_cores())
            and _REGISTERED.get(name, source_class) is source_class
            and _found_by_spark(spark, data_source)
        ):
            continue
        spark.dataSource.register(data_source)
        _REGISTERED[name] = source_class


_REGISTERED: dict[str, type[Source[Any, Any]]] = {}
"""The source class :func:`register` last registered under each format name: a packaged
format another class replaced must be registered again to be read."""


def _found_by_spark(spark: SparkSession, data_source: type[DataSource]) -> bool:
    """Whether a classic session's Spark registered the source of ``data_source`` itself,
    from the ``DefaultSource`` of an installed ``pyspark_*`` module (False on Spark Connect,
    whose server's registrations a client cannot see)."""
    name, source_class = data_source.name(), getattr(data_source, "source_class", None)
    try:
        module = importlib.import_module("pyspark_" + name.replace(".", "_"))
    except ImportError:
        return False
    if getattr(getattr(module, "DefaultSource", None), "source_class", None) is not source_class:
        return False
    session = getattr(spark, "_jsparkSession", None)
    if session is None:
        return False
    return bool(session.sessionState().dataSourceManager().dataSourceExists(name))


def data_source_for(
    source_class: type[Source[Any, Any]], parallelism: int | None = None
) -> type[DataSource]:
    """The Spark ``DataSource`` class that serves ``source_class`` on ``parallelism`` cores.

    Without ``parallelism``, a read plans for the cores of the driver's machine. Use it
    for a ``pyspark_<module>.DefaultSource`` (registration without code) or to call
    ``spark.dataSource.register`` yourself.

    Raises
    ------
    SourceDefinitionError
        If a method of the source (or of the reader, enumerator or serializer it is
        annotated to create) does not take the parameters splitsource passes.

    Examples
    --------
    >>> from sources.numbers.source import NumberSequenceSource
    >>> DefaultSource = data_source_for(NumberSequenceSource)
    >>> DefaultSource.name()
    'splitsource.numbers'
    """
    check_source_class(source_class)
    return type(
        f"{source_class.__name__}DataSource",
        (SplitSourceDataSource,),
        {"source_class": source_class, "parallelism": parallelism, "__module__": __name__},
    )


class SplitSourceDataSource(DataSource):
    """Serves one :class:`Source` class; subclassed per source by :func:`data_source_for`."""

    source_class: type[Source[Any, Any]]
    parallelism: int | None = None
    """The default parallelism that sizes default partitions, if registration knew it."""

    @shown_plainly
    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        self.source, self.read_options = self.source_class.from_spark_options(options)
        check_stream_options(self.source, self.read_options)
        pin(self.source)

    @classmethod
    def name(cls) -> str:
        return cls.source_class.format_name()

    @shown_plainly
    def schema(self) -> StructType | str:
        return self.source.schema()

    @shown_plainly
    def reader(self, schema: StructType) -> DataSourceReader:
        if Boundedness.BOUNDED not in self.source_class.supported_boundedness:
            raise UnsupportedBoundednessError(
                f"{self.name()} cannot do a bounded read with spark.read; "
                "read it with spark.readStream instead."
            )
        pushes = isinstance(self.source, SupportsFilterPushdown) and pushdown_wanted(
            self.read_options["pushFilters"], self.name()
        )
        reader = FilteringSourceReader if pushes else BoundedSourceReader
        return reader(self.source, schema, self.read_options, self._cores())

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        try:
            return SplitSourceStreamReader(
                unpinned(self.source), schema, self.read_options, self._cores()
            )
        except Exception as error:  # raised from the first call instead: see the class
            return RefusedStreamReader(error)

    def _cores(self) -> int:
        return driver_cores() if self.parallelism is None else self.parallelism


class BoundedSourceReader(SplitPartitionReading, DataSourceReader):
    """A ``spark.read`` of a source: plans every split, reads each partition's splits."""

    @shown_plainly
    def partitions(self) -> Sequence[InputPartition]:
        return self.partitions_of(plan_bounded(self.source))


class FilteringSourceReader(BoundedSourceReader):
    """A bounded read of a source that takes Spark's filters (:class:`SupportsFilterPushdown`)."""

    @shown_plainly
    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:
        if not isinstance(self.source, SupportsFilterPushdown):
            return filters
        self.source, remaining = self.source.push_filters(filters, arrow_schema(self.schema))
        return remaining


def plan_bounded(source: Source[Any, Any]) -> list[Any]:
    """Every split of a bounded read, in the order the enumerator hands them out."""
    enumerator: SplitEnumerator[Any, Any] = source.create_enumerator(
        EnumeratorContext(ReadMode.BATCH)
    )
    enumerator.start()
    try:
        if isinstance(enumerator, PeriodicSplitEnumerator):
            enumerator.handle_discovered_splits(enumerator.discover_more_splits())
        splits: list[Any] = []
        idle_rounds = 0
        while not enumerator.is_end_of_input():
            handed_out = enumerator.next_splits()
            splits.extend(handed_out)
            idle_rounds = 0 if handed_out else idle_rounds + 1
            if idle_rounds >= _PLANNING_ROUNDS_WITHOUT_PROGRESS:
                raise SplitSourceError(
                    f"The enumerator of {source.format_name()} neither hands out splits nor "
                    "reports end of input in a bounded read; a bounded enumerator must know "
                    "all its splits after start() (or its one discovery)."
                )
        require_unique_split_ids(splits, f"the plan of {source.format_name()}")
        return splits
    finally:
        enumerator.close()
