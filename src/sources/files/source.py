"""``splitsource.files``: Parquet, CSV, JSON Lines and text files from any fsspec URL.

Bounded with ``spark.read`` and continuous with ``spark.readStream``. Files
are listed on the driver (:mod:`enumerators.files.enumerator`), cut into byte-range
splits where the format allows, and decoded on the executors straight into
Arrow batches (:mod:`readers.files.formats`). Hive-style ``key=value`` directories
become columns, appended after the file's own columns as in Spark.
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any, ClassVar

import pyarrow as pa
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from enumerators.base import EnumeratorContext, ReadMode
from enumerators.files.enumerator import (
    FileEnumerator,
    FileEnumeratorState,
    FileEnumeratorStateSerializer,
    SourceCleaner,
    SplitCutter,
)
from enumerators.files.event_time import (
    EventTimeSpec,
    FileEventTime,
    PartitionTime,
    parse_event_time,
)
from enumerators.files.listing import ListedFile, Listing, split_outside_braces
from readers.files.formats import (
    COMPRESSIONS,
    FILE_FORMATS,
    FORMATS,
    MODES,
    FormatOptions,
    infer_schema,
)
from readers.files.reader import FileReadConfig, FileSplitReader, SkipPolicy
from sources.api import Source
from sources.capabilities import (
    SupportsEventTime,
    SupportsFilterPushdown,
    SupportsPinning,
    SupportsPlanRefinement,
    SupportsStorageOptions,
)
from sources.errors import FileReadError, InvalidOptionError, SourceUnavailableError
from sources.files.filesystems import Storage, same_filesystem, strip_protocol
from sources.files.format_options import (
    DEFAULT_ONLY_OPTIONS,
    FORMAT_OPTION_ALIASES,
    FORMAT_OPTIONS,
    REFUSED_OPTIONS,
    WRITE_ONLY_OPTIONS,
    format_options_from,
)
from sources.files.partitioning import infer_partition_type, matching_partitions
from sources.files.splits import FileSplit, FileSplitSerializer
from sources.filters import Filter
from sources.options import Option, Options
from sources.outages import storage_outage
from sources.split import Boundedness
from sources.tuning import Tuning

__all__ = ["FileSource"]

CLEAN_SOURCE = ("off", "delete", "archive")
_LOG = logging.getLogger("splitsource.files")


def _mode(text: str) -> str:
    value = text.strip().upper()
    if value not in MODES:
        raise ValueError(f"expected one of {', '.join(MODES)}, got '{text}'")
    return value


def _timestamp_ms(text: str) -> int:
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(
            f"expected a timestamp such as 2024-06-01T12:00:00, got '{text}'"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def _paths(text: str) -> tuple[str, ...]:
    stripped = text.strip()
    if stripped.startswith("["):
        return tuple(str(path) for path in json.loads(stripped))
    return tuple(path.strip() for path in split_outside_braces(stripped) if path.strip())


class FileSource(
    SupportsFilterPushdown,
    SupportsPlanRefinement[FileSplit],
    SupportsPinning,
    SupportsEventTime,
    SupportsStorageOptions,
    Source[FileSplit, FileEnumeratorState],
):
    """Files in one ``format`` under ``path``: directories (as Spark reads them), files or globs.

    Example::

        register(spark, FileSource)
        spark.read.format("splitsource.files").option("format", "csv")
             .option("header", "true").load("/data/events")
    """

    name = "files"
    supported_boundedness = frozenset({Boundedness.BOUNDED, Boundedness.CONTINUOUS_UNBOUNDED})
    # Records per batch: the rows a decoder yields at a time (FormatOptions.batch_rows),
    # so batches go on as decoded; Spark takes fewer, larger Arrow batches from Python
    # faster, most of all in reads of few columns (measured in benchmarks/history-files.md).
    # maxBytesPerBatch still bounds wide rows. Streams keep the paths already read.
    tuning = Tuning(
        max_partition_bytes=128 << 20,
        max_records_per_batch=65_536,
        state_location_required=True,
    )
    option_aliases: ClassVar = MappingProxyType(
        {"maxFilesPerTrigger": "maxSplitsPerTrigger", **FORMAT_OPTION_ALIASES}
    )
    options: ClassVar = (
        Option(
            "path", _paths, "a file, directory or glob (any fsspec URL); or use load(path)", ()
        ).listed("supported (see [Paths](files.md#paths))", shown="", formats="all"),
        Option("paths", _paths, "several paths, comma separated or a JSON list", ()).listed(
            "supported (see [Paths](files.md#paths))", shown="", formats="all"
        ),
        Option.choice("format", "the file format", FORMATS, None)
        .lands_in("format")
        .listed("`parquet`, `csv`, `json`, `text`", shown="required", formats="all"),
        Option.choice("compression", "file compression", COMPRESSIONS, "infer")
        .lands_in("compression")
        .listed(
            "supported on read: `infer`, `none`, `gzip`, `bz2`, `zstd`",
            formats="csv, json, text",
            spark="from the extension",
        ),
        Option("mode", _mode, "csv, json: PERMISSIVE, DROPMALFORMED or FAILFAST", "PERMISSIVE")
        .lands_in("mode")
        .listed(
            "supported: `PERMISSIVE`, `DROPMALFORMED`, `FAILFAST`",
            formats="csv, json",
            spark="`PERMISSIVE`",
        ),
        Option.string(
            "columnNameOfCorruptRecord",
            "csv, json: the column that holds malformed records with mode PERMISSIVE",
            default="_corrupt_record",
        )
        .lands_in("corrupt_column")
        .listed("supported", formats="csv, json", spark="`_corrupt_record`"),
        Option.boolean(
            "ignoreMissingFiles", "skip files deleted after they were listed", default=False
        ).listed("supported", formats="all", spark="`false`"),
        Option.boolean(
            "ignoreCorruptFiles", "skip the rest of files that cannot be decoded", default=False
        ).listed(
            "supported; also skips files schema inference cannot read",
            formats="all",
            spark="`false`",
        ),
        Option.secret_json_object(
            "storageOptions",
            "a JSON object of fsspec filesystem arguments (credentials, endpoint, ...)",
            None,
        ).listed("ours: JSON object of fsspec filesystem arguments", formats="all"),
        Option.boolean(
            "recursiveFileLookup", "read every file below, no partition columns", default=False
        ).listed("supported", formats="all", spark="`false`"),
        Option.string(
            "basePath", "where partition directories start, when reading some of them", None
        ).listed("supported: partition directories start below it", formats="all", spark="not set"),
        Option.boolean(
            "partitionColumnTypeInference",
            "type partition values as Spark does (int, date, ...); false: all strings",
            default=True,
        ).listed(
            "ours, for Spark's conf: `false` types partition values as strings",
            formats="all",
            spark="conf `spark.sql.sources.partitionColumnTypeInference.enabled`, `true`",
        ),
        Option.string(
            "pathGlobFilter", "only files whose name matches this glob", default=None
        ).listed("supported, with `{a,b}` alternatives", formats="all", spark="not set"),
        Option("modifiedAfter", _timestamp_ms, "only files modified after (UTC)", None).listed(
            "supported (ISO timestamp, UTC if no zone)", formats="all", spark="not set"
        ),
        Option("modifiedBefore", _timestamp_ms, "only files modified before (UTC)", None).listed(
            "supported (ISO timestamp, UTC if no zone)", formats="all", spark="not set"
        ),
        Option.size(
            "maxSplitBytes", "cut splittable files into ranges of this size", 128 << 20
        ).listed(
            "ours: cut splittable files into ranges of this size", shown="`128m`", formats="all"
        ),
        Option.boolean("latestFirst", "streaming: newest files first", default=False).listed(
            "supported: newest files first", formats="all, streaming", spark="`false`"
        ),
        Option.duration(
            "maxFileAge", "streaming: ignore files older than this", 7 * 86400.0
        ).listed(
            "supported: files older than the newest found minus this are not read (see "
            "[What a file stream remembers](files-streaming.md#what-a-file-stream-remembers))",
            shown="`7d`",
            formats="all, streaming",
            spark="`7d`",
        ),
        Option(
            "eventTime",
            parse_event_time,
            "streaming: where a file's earliest event time comes from; files are read in "
            "that order and maxEventTimeDrift can align them",
            None,
        ).listed(
            "ours: `modificationTime`, `partition:<date column>[,<hour column>[,<minute "
            "column>]]` or (Parquet) `column:<name>`: files are read in event-time order, "
            "and `maxEventTimeDrift` applies (see [Event time](files-streaming.md#event-time))",
            shown="not set",
            formats="all, streaming",
        ),
        Option.choice(
            "cleanSource", "streaming: what to do with read files", CLEAN_SOURCE, "off"
        ).listed(
            "supported: `off`, `delete`, `archive` committed files",
            formats="all, streaming",
            spark="`off`",
        ),
        Option.string(
            "sourceArchiveDir", "streaming: where cleanSource=archive moves files", None
        ).listed(
            "supported: where `cleanSource=archive` moves files",
            formats="all, streaming",
            spark="not set",
        ),
        *FORMAT_OPTIONS,
        *DEFAULT_ONLY_OPTIONS,
        *REFUSED_OPTIONS,
        *WRITE_ONLY_OPTIONS,
    )

    event_time_hint = (
        "drop the option, or set the option eventTime (modificationTime, partition:<date "
        "column>[,<hour column>] or, for Parquet, column:<name>)"
    )
    storage_class: ClassVar[type[Storage]] = Storage
    """The storage the paths are read through; a subclass may bring its own filesystem."""

    def __init__(
        self,
        paths: tuple[str, ...],
        storage: Storage,
        listing: Listing,
        read: FileReadConfig,
        cutter: SplitCutter,
        cleaner: SourceCleaner | None,
        max_file_age_ms: int,
        latest_first: bool,
        infer_partition_types: bool = True,
        event_time: FileEventTime | None = None,
    ) -> None:
        self.paths = paths
        self.storage = storage
        self.listing = listing
        self.read = read
        self.cutter = cutter
        self.cleaner = cleaner
        self.max_file_age_ms = max_file_age_ms
        self.latest_first = latest_first
        self.infer_partition_types = infer_partition_types
        self.event_time = event_time
        """Where a file's event time comes from (``eventTime``); streams only."""
        if storage.is_local:  # the task's thread reads local files without waiting
            self.tuning = replace(type(self).tuning, read_ahead=0)
        self.partition_columns: dict[str, pa.DataType] = {}
        """The partition columns of the read schema, once filters are pushed."""
        self.listed: tuple[tuple[Any, ...], ...] | None = None
        """The files of a bounded read once listed, as plain tuples (a million pickle in
        about 2 s, a third of the time of :class:`ListedFile` objects)."""

    @classmethod
    def from_options(cls, options: Options) -> FileSource:
        name = cls.format_name()
        paths: tuple[str, ...] = (*options["path"], *options["paths"])
        if not paths:
            raise InvalidOptionError(
                name, "path", "is required: give load(path) or .option('path', ...)"
            )
        if options["format"] is None:
            raise InvalidOptionError(name, "format", "is required", list(FORMATS))
        clean = options["cleanSource"]
        archive = options["sourceArchiveDir"]
        if clean == "archive" and not archive:
            raise InvalidOptionError(
                name, "sourceArchiveDir", "is required when cleanSource is archive"
            )
        storage = cls.storage_class(paths[0], options["storageOptions"] or {})
        format_options = format_options_from(cls.options, options)
        event_time = _event_time(name, options, format_options)
        return cls(
            paths,
            storage,
            Listing(
                tuple(strip_protocol(path) for path in paths),
                options["pathGlobFilter"],
                options["recursiveFileLookup"],
                options["modifiedAfter"],
                options["modifiedBefore"],
                strip_protocol(options["basePath"]) if options["basePath"] else None,
            ),
            FileReadConfig(
                storage,
                format_options,
                SkipPolicy(options["ignoreMissingFiles"], options["ignoreCorruptFiles"]),
            ),
            _cutter(format_options, clean, options["maxSplitBytes"]),
            None if clean == "off" else SourceCleaner(storage, _archive_dir(clean, archive)),
            int(options["maxFileAge"] * 1000),
            options["latestFirst"],
            options["partitionColumnTypeInference"],
            event_time,
        )

    def storage_options_for(self, url: str) -> Mapping[str, Any]:
        """The ``storageOptions`` of the data, for a URL on the same filesystem."""
        return self.storage.options if same_filesystem(url, self.storage.url) else {}

    def schema(self) -> StructType:
        files = self._listed_once()
        if not files:
            raise InvalidOptionError(
                self.format_name(),
                "path",
                f"matches no files ({', '.join(self.paths)}); give a schema with .schema(...) "
                "to read an empty or not yet filled location",
            )
        data = self._data_schema(files)
        partitions = _partition_fields(files, self.infer_partition_types)
        return from_arrow_schema(pa.schema([*data, *partitions]))

    def _data_schema(self, files: list[ListedFile]) -> pa.Schema:
        """Inferred from the first file in path order that has columns, or from every file
        with ``mergeSchema``; files that ``ignoreCorruptFiles``/``ignoreMissingFiles`` skip
        are left out.

        A file of no records, or of one malformed record (JSON ``multiLine``), has no
        columns: the next file's schema is used, with the corrupt-record column if such a
        file gave it (only JSON infers it; its fields are sorted by name, as Spark's).
        """
        found = []
        corrupt = self.read.format.corrupt_column
        for file in files:
            try:
                schema = infer_schema(self.storage.fs, file.path, self.read.format)
            except FileReadError as error:
                if not self.read.skip.skips(error):
                    raise
                _LOG.warning("splitsource.files: inference skipped '%s': %s", file.path, error)
                continue
            found.append(schema)
            if not self.read.format.merge_schema and set(schema.names) - {corrupt}:
                break
        if found and not self.read.format.merge_schema:
            schema = found[-1]
            added = [s.field(corrupt) for s in found[:-1] if corrupt in s.names]
            if added and corrupt not in schema.names:
                schema = pa.schema(sorted([*schema, added[0]], key=lambda field: field.name))
            return schema
        if not found:
            raise InvalidOptionError(
                self.format_name(),
                "ignoreCorruptFiles",
                f"skipped every file of {', '.join(self.paths)} while inferring the schema; "
                "give a schema with .schema(...), or fix the files",
            )
        try:
            return pa.unify_schemas(found)
        except pa.ArrowInvalid as error:
            raise InvalidOptionError(
                self.format_name(),
                "mergeSchema",
                f"the files' schemas do not merge ({error}); give a schema with .schema(...)",
            ) from None

    def pin(self) -> None:
        """List the files: every query of the DataFrame reads these, as Spark lists at load().

        A partition column that ``eventTime`` names must give every listed file a time:
        checked here, at load(), as it costs nothing.
        """
        files = self._listed_once()
        if isinstance(self.event_time, PartitionTime):
            self.event_time.earliest(self.storage.fs, files)

    def knows_event_time(self) -> bool:
        """Yes, given ``eventTime``."""
        return self.event_time is not None

    def unpinned(self) -> FileSource:
        if self.listed is None:
            return self
        unpinned = copy.copy(self)
        unpinned.listed = None
        return unpinned

    def _listed_once(self) -> list[ListedFile]:
        """The files of a bounded read, listed when first asked for and then kept."""
        if self.listed is None:
            self.listed = tuple(tuple(file) for file in self.listing.files(self.storage.fs))
        return [ListedFile._make(file) for file in self.listed]

    def _enumerator(self, state: FileEnumeratorState, streaming: bool = True) -> FileEnumerator:
        return FileEnumerator(
            self.storage.fs,
            self.listing,
            self.cutter,
            state,
            max_file_age_ms=self.max_file_age_ms if streaming else None,
            latest_first=self.latest_first,
            cleaner=self.cleaner,
            listed=None if streaming else self._listed_once(),
            event_time=self.event_time if streaming else None,
        )

    def create_enumerator(self, context: EnumeratorContext) -> FileEnumerator:
        # A bounded enumerator made fresh is a spark.read, which reads files of any age
        # (maxFileAge is a stream option); streams, AvailableNow included, restore theirs.
        return self._enumerator(FileEnumeratorState(), streaming=context.mode is not ReadMode.BATCH)

    def restore_enumerator(
        self, context: EnumeratorContext, state: FileEnumeratorState
    ) -> FileEnumerator:
        return self._enumerator(state)

    def push_filters(
        self, filters: Sequence[Filter], schema: pa.Schema
    ) -> tuple[FileSource, Sequence[Filter]]:
        """Prune partitions and skip rows by ``filters``; Spark still applies every one.

        Partition directories are pruned when the read is planned, Parquet row
        groups by their statistics, and each batch's rows with Arrow before it
        reaches Spark; none of it drops a row Spark would keep.
        """
        pushed = copy.copy(self)
        pushed.read = replace(self.read, filters=tuple(filters))
        pushed.partition_columns = {field.name: field.type for field in schema}
        return pushed, filters

    def refine_plan(self, splits: Sequence[FileSplit]) -> Sequence[FileSplit]:
        """The splits of the partitions the pushed filters may match."""
        if not self.read.filters:
            return splits
        partitions = {split.partition for split in splits}
        kept = matching_partitions(
            partitions, self.read.filters, self.partition_columns, self.read.format.time_zone
        )
        return [split for split in splits if split.partition in kept]

    def as_unavailable(self, error: Exception) -> SourceUnavailableError | None:
        """An endpoint that refuses, drops or times out connections, in the cause chain of
        what the storage's client raised, is one."""
        outage = storage_outage(error)
        if outage is None:
            return super().as_unavailable(error)
        problem = f"{type(outage).__name__}: {outage}"
        return SourceUnavailableError(problem, f"the storage of {self.storage.url}")

    def create_reader(self, schema: pa.Schema) -> FileSplitReader:
        return FileSplitReader(self.read, schema)

    def split_serializer(self) -> FileSplitSerializer:
        return FileSplitSerializer()

    def enumerator_state_serializer(self) -> FileEnumeratorStateSerializer:
        return FileEnumeratorStateSerializer()


def _event_time(name: str, options: Options, read: FormatOptions) -> FileEventTime | None:
    """The rule ``eventTime`` names, refused where it cannot hold: statistics of a
    format without them, and ``latestFirst``, an order of its own."""
    spec: EventTimeSpec | None = options["eventTime"]
    if spec is None:
        return None
    if spec.kind == "column" and read.format != "parquet":
        raise InvalidOptionError(
            name,
            "eventTime",
            f"column:{spec.columns[0]} reads Parquet row-group statistics, which "
            f"{read.format} files do not have; use partition:<columns> or modificationTime",
        )
    if options["latestFirst"]:
        raise InvalidOptionError(
            name,
            "latestFirst",
            "cannot be combined with eventTime, which reads files in event-time order, "
            "earliest first; drop one of them",
        )
    return spec.rule(read.time_zone, name)


def _cutter(options: FormatOptions, clean: str, max_split_bytes: int) -> SplitCutter:
    """Files cut into ranges, except those the format reads whole; all whole if cleaned."""
    whole = FILE_FORMATS[options.format].whole_file_extensions(options)
    if clean != "off" or whole is None:
        return SplitCutter(None)
    return SplitCutter(max_split_bytes, whole)


def _archive_dir(clean: str, archive: str | None) -> str | None:
    """Where cleaned files move: below ``archive`` for ``archive``, nowhere (deleted) else."""
    return strip_protocol(archive) if clean == "archive" and archive else None


def _partition_fields(files: list[ListedFile], inference: bool) -> list[pa.Field]:
    values: dict[str, list[str]] = {}
    for file in files:
        for key, value in file.partition:
            values.setdefault(key, []).append(value)
    return [pa.field(key, infer_partition_type(found, inference)) for key, found in values.items()]
