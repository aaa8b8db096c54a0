"""``splitsource.files``: Parquet, CSV, JSON Lines and text files from any fsspec URL.

Bounded with ``spark.read`` and continuous with ``spark.readStream``. Files
are listed on the driver (:mod:`enumerators.files`), cut into byte-range
splits where the format allows, and decoded on the executors straight into
Arrow batches (:mod:`readers.formats`). Hive-style ``key=value`` directories
become columns, appended after the file's own columns as in Spark.
"""

from __future__ import annotations

import json
import posixpath
import struct
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, ClassVar

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from enumerators.base import EnumeratorContext, ReadMode
from enumerators.files import FileEnumerator, FileEnumeratorState, ListedFile, Listing, split_file
from readers.files import FileSplitReader, SkipPolicy
from readers.formats import MODES, FormatOptions, infer_schema, is_splittable
from sources.api import Source
from sources.errors import CorruptDataError, InvalidOptionError
from sources.options import Option, Options
from sources.serialization import SimpleVersionedSerializer
from sources.split import Boundedness, SourceSplit

__all__ = [
    "FileEnumeratorStateSerializer",
    "FileSource",
    "FileSplit",
    "FileSplitSerializer",
]

FORMATS = ("parquet", "csv", "json", "text")
CLEAN_SOURCE = ("off", "delete", "archive")


@dataclass(frozen=True)
class FileSplit(SourceSplit):
    """The bytes ``[start, start + length)`` of the file ``path``."""

    path: str
    start: int
    length: int
    file_size: int
    modified_ms: int
    partition: tuple[tuple[str, str], ...] = ()

    @property
    def split_id(self) -> str:
        return f"{self.path}:{self.start}"

    def estimated_bytes(self) -> int:
        return self.length


def _split_to_json(split: FileSplit) -> list[Any]:
    return [
        split.path,
        split.start,
        split.length,
        split.file_size,
        split.modified_ms,
        [list(pair) for pair in split.partition],
    ]


def _split_from_json(data: list[Any]) -> FileSplit:
    path, start, length, size, modified, partition = data
    return FileSplit(path, start, length, size, modified, tuple(tuple(p) for p in partition))


class FileSplitSerializer(SimpleVersionedSerializer[FileSplit]):
    """Version 1: a compact JSON array of the split's fields."""

    @property
    def version(self) -> int:
        return 1

    def serialize(self, obj: FileSplit) -> bytes:
        return json.dumps(_split_to_json(obj), separators=(",", ":")).encode()

    def deserialize(self, version: int, data: bytes) -> FileSplit:
        return _split_from_json(json.loads(data))


class FileEnumeratorStateSerializer(SimpleVersionedSerializer[FileEnumeratorState]):
    """Version 2: the seen files as compressed columns. Reads version 1 (JSON) too.

    Version 2's payload is the 8-byte big-endian length of a body, then the
    body compressed with zstd. The body is a 4-byte big-endian length, a JSON
    header ``{"newest_ms", "pending": [split...], "seen": n, "to_clean"}``,
    then the ``n`` seen paths in sorted order as an Arrow ``large_string``
    column (``n + 1`` int64 offsets, then the UTF-8 bytes; a lone surrogate,
    which is how Python reads a local name that is not UTF-8, is written as
    ``surrogatepass`` does) and their modification times (``n`` int64), all
    numbers little-endian. Sorting, packing and compressing happen in Arrow:
    100,000 seen files take some 50 ms and 270 KB, not a Python loop over JSON.

    Version 1 was JSON ``{"pending": [split...], "seen": {path: ms},
    "to_clean": [path...]}`` with every pending split; its pending splits are
    handed out before anything else after a restore.
    """

    @property
    def version(self) -> int:
        return 2

    def serialize(self, obj: FileEnumeratorState) -> bytes:
        paths = _path_column(list(obj.seen))
        order = pc.sort_indices(paths)
        paths = paths.take(order)
        modified = pa.array(list(obj.seen.values()), pa.int64()).take(order)
        count = len(paths)
        offsets = np.frombuffer(paths.buffers()[1], np.int64, count + 1, paths.offset * 8)
        data = paths.buffers()[2]
        text = b"" if data is None else data.to_pybytes()[offsets[0] : offsets[-1]]
        header = {
            "newest_ms": obj.newest_ms,
            "pending": [_split_to_json(split) for split in obj.pending],
            "seen": count,
            "to_clean": list(obj.to_clean),
        }
        encoded = json.dumps(header, separators=(",", ":"), sort_keys=True).encode()
        body = b"".join(
            [
                _LENGTH.pack(len(encoded)),
                encoded,
                (offsets - offsets[0]).astype("<i8").tobytes(),
                text,
                modified.to_numpy().astype("<i8").tobytes(),
            ]
        )
        compressed: bytes = _CODEC.compress(body, asbytes=True)
        return _BODY_LENGTH.pack(len(body)) + compressed

    def deserialize(self, version: int, data: bytes) -> FileEnumeratorState:
        if version == 1:
            return _state_from_json(data)
        (size,) = _BODY_LENGTH.unpack_from(data)
        body = _CODEC.decompress(data[_BODY_LENGTH.size :], size, asbytes=True)
        (header_size,) = _LENGTH.unpack_from(body)
        at = _LENGTH.size + header_size
        header = json.loads(body[_LENGTH.size : at])
        count = int(header["seen"])
        offsets = np.frombuffer(body, "<i8", count + 1, at).astype(np.int64)
        at += (count + 1) * 8
        text = body[at : at + int(offsets[-1])]
        at += len(text)
        modified = np.frombuffer(body, "<i8", count, at)
        if at + count * 8 != len(body) or offsets[0] != 0:
            raise CorruptDataError("the seen files do not fill the file enumerator state")
        buffers = [None, pa.py_buffer(offsets.tobytes()), pa.py_buffer(text)]
        return FileEnumeratorState(
            tuple(_split_from_json(split) for split in header["pending"]),
            dict(zip(_paths_of(count, buffers), modified.tolist(), strict=True)),
            tuple(header["to_clean"]),
            header["newest_ms"],
        )


_CODEC = pa.Codec("zstd")
_BODY_LENGTH = struct.Struct(">Q")
_LENGTH = struct.Struct(">I")
_SURROGATES = "surrogatepass"  # a local name that is not UTF-8 reaches Python with surrogates


def _path_column(paths: list[str]) -> pa.Array:
    """``paths`` as Arrow strings, or as their bytes if one holds a lone surrogate."""
    try:
        return pa.array(paths, pa.large_string())
    except UnicodeEncodeError:
        return pa.array([path.encode("utf-8", _SURROGATES) for path in paths], pa.large_binary())


def _paths_of(count: int, buffers: list[Any]) -> list[str]:
    """The paths :func:`_path_column` wrote into ``buffers`` (offsets, then bytes)."""
    column = pa.Array.from_buffers(pa.large_string(), count, buffers)
    try:
        column.validate(full=True)
    except pa.ArrowInvalid:
        column = pa.Array.from_buffers(pa.large_binary(), count, buffers)
        column.validate(full=True)
        return [path.decode("utf-8", _SURROGATES) for path in column.to_pylist()]
    paths: list[str] = column.to_pylist()
    return paths


def _state_from_json(data: bytes) -> FileEnumeratorState:
    """A version 1 state; its newest seen file is the newest found, as version 1 counted."""
    document = json.loads(data)
    if not isinstance(document, dict):
        raise CorruptDataError("file enumerator state is not a JSON object")
    seen = {str(path): int(ms) for path, ms in document["seen"].items()}
    return FileEnumeratorState(
        tuple(_split_from_json(split) for split in document["pending"]),
        seen,
        tuple(document["to_clean"]),
        max(seen.values(), default=None),
    )


def _choice(name: str, choices: tuple[str, ...], doc: str, default: Any) -> Option:
    def parse(text: str) -> str:
        value = text.strip().lower()
        if value not in choices:
            raise ValueError(f"expected one of {', '.join(choices)}, got '{text}'")
        return value

    return Option(name, parse, doc, default)


def _mode(text: str) -> str:
    value = text.strip().upper()
    if value not in MODES:
        raise ValueError(f"expected one of {', '.join(MODES)}, got '{text}'")
    return value


def _storage_options(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        # The text may hold credentials: say what is wrong, never echo it.
        raise ValueError('expected a JSON object such as {"anon": true} (value not shown)')
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
    return tuple(path.strip() for path in stripped.split(",") if path.strip())


class FileSource(Source[FileSplit, FileEnumeratorState]):
    """Files in one ``format`` under ``path``: directories (recursive), files or globs.

    Example::

        sources.register(spark, FileSource)
        spark.read.format("splitsource.files").option("format", "csv")
             .option("header", "true").load("/data/events")
    """

    name = "files"
    supported_boundedness = frozenset({Boundedness.BOUNDED, Boundedness.CONTINUOUS_UNBOUNDED})
    default_max_partition_bytes = 128 << 20
    streams_need_state_location = True
    option_aliases: ClassVar = {"maxFilesPerTrigger": "maxSplitsPerTrigger"}
    options: ClassVar = (
        Option("path", _paths, "a file, directory or glob (any fsspec URL); or use load(path)", ()),
        Option("paths", _paths, "several paths, comma separated or a JSON list", ()),
        _choice("format", FORMATS, "the file format", None),
        Option.boolean("header", "csv: the first line holds column names", default=False),
        Option.string("sep", "csv: the field separator", default=","),
        Option.string("quote", "csv: the quote character", default='"'),
        Option.string("escape", "csv: the escape character", default=None),
        _choice(
            "compression", ("infer", "none", "gzip", "bz2", "zstd"), "file compression", "infer"
        ),
        Option("mode", _mode, "csv, json: FAILFAST, DROPMALFORMED or PERMISSIVE", "FAILFAST"),
        Option.string(
            "columnNameOfCorruptRecord",
            "csv, json: the column that holds malformed lines with mode PERMISSIVE",
            default="_corrupt_record",
        ),
        Option.boolean(
            "ignoreMissingFiles", "skip files deleted after they were listed", default=False
        ),
        Option.boolean(
            "ignoreCorruptFiles", "skip the rest of files that cannot be decoded", default=False
        ),
        Option(
            "storageOptions",
            _storage_options,
            "a JSON object of fsspec filesystem arguments (credentials, endpoint, ...)",
            None,
        ),
        Option.boolean(
            "recursiveFileLookup", "read every file below, no partition columns", default=False
        ),
        Option.string("pathGlobFilter", "only files whose name matches this glob", default=None),
        Option("modifiedAfter", _timestamp_ms, "only files modified after (UTC)", None),
        Option("modifiedBefore", _timestamp_ms, "only files modified before (UTC)", None),
        Option.size("maxSplitBytes", "cut splittable files into ranges of this size", 128 << 20),
        Option.boolean("latestFirst", "streaming: newest files first", default=False),
        Option.duration("maxFileAge", "streaming: ignore files older than this", 7 * 86400.0),
        _choice("cleanSource", CLEAN_SOURCE, "streaming: what to do with read files", "off"),
        Option.string("sourceArchiveDir", "streaming: where cleanSource=archive moves files", None),
    )

    def __init__(self, options: Options) -> None:
        self.settings = dict(options)
        self.paths: tuple[str, ...] = (*options["path"], *options["paths"])

    @classmethod
    def from_options(cls, options: Options) -> FileSource:
        source = cls(options)
        name = cls.format_name()
        if not source.paths:
            raise InvalidOptionError(
                name, "path", "is required: give load(path) or .option('path', ...)"
            )
        if options["format"] is None:
            raise InvalidOptionError(
                name, "format", "is required", ["parquet", "csv", "json", "text"]
            )
        if options["cleanSource"] == "archive" and not options["sourceArchiveDir"]:
            raise InvalidOptionError(
                name, "sourceArchiveDir", "is required when cleanSource is archive"
            )
        return source

    @property
    def fs(self) -> fsspec.AbstractFileSystem:
        """The filesystem of the first path."""
        fs, _ = fsspec.core.url_to_fs(self.paths[0], **(self.settings["storageOptions"] or {}))
        return fs

    def listing(self) -> Listing:
        """The listing the options describe."""
        fs = self.fs
        return Listing(
            tuple(fs._strip_protocol(path) for path in self.paths),
            self.settings["pathGlobFilter"],
            self.settings["recursiveFileLookup"],
            self.settings["modifiedAfter"],
            self.settings["modifiedBefore"],
        )

    def format_options(self, data_schema: pa.Schema) -> FormatOptions:
        """How to decode the files into ``data_schema``."""
        return FormatOptions(
            format=self.settings["format"],
            data_schema=data_schema,
            header=self.settings["header"],
            sep=self.settings["sep"],
            quote=self.settings["quote"],
            escape=self.settings["escape"],
            compression=self.settings["compression"],
            mode=self.settings["mode"],
            corrupt_column=self.settings["columnNameOfCorruptRecord"],
        )

    def schema(self) -> Any:
        from pyspark.sql.pandas.types import from_arrow_schema

        files = self.listing().files(self.fs)
        if not files:
            raise InvalidOptionError(
                self.format_name(),
                "path",
                f"matches no files ({', '.join(self.paths)}); give a schema with .schema(...) "
                "to read an empty or not yet filled location",
            )
        sample = self.format_options(pa.schema([]))
        data = infer_schema(self.fs, files[0].path, sample)
        return from_arrow_schema(pa.schema([*data, *_partition_fields(files)]))

    def _cut(self, file: ListedFile) -> list[FileSplit]:
        splittable = self.settings["cleanSource"] == "off" and is_splittable(
            file.path, self.format_options(pa.schema([]))
        )
        return split_file(file, splittable, self.settings["maxSplitBytes"])

    def _enumerator(self, state: FileEnumeratorState, streaming: bool = True) -> FileEnumerator:
        return FileEnumerator(
            self.fs,
            self.listing(),
            self._cut,
            state,
            max_file_age_ms=int(self.settings["maxFileAge"] * 1000) if streaming else None,
            latest_first=self.settings["latestFirst"],
            cleanup=None if self.settings["cleanSource"] == "off" else self._clean,
        )

    def create_enumerator(self, context: EnumeratorContext) -> FileEnumerator:
        # A bounded enumerator made fresh is a spark.read, which reads files of any age
        # (maxFileAge is a stream option); streams, AvailableNow included, restore theirs.
        return self._enumerator(FileEnumeratorState(), streaming=context.mode is not ReadMode.BATCH)

    def restore_enumerator(
        self, context: EnumeratorContext, state: FileEnumeratorState
    ) -> FileEnumerator:
        return self._enumerator(state)

    def create_reader(self, schema: pa.Schema) -> FileSplitReader:
        return FileSplitReader(
            self.fs,
            self.format_options,
            schema,
            SkipPolicy(self.settings["ignoreMissingFiles"], self.settings["ignoreCorruptFiles"]),
        )

    def split_serializer(self) -> FileSplitSerializer:
        return FileSplitSerializer()

    def enumerator_state_serializer(self) -> FileEnumeratorStateSerializer:
        return FileEnumeratorStateSerializer()

    def _clean(self, path: str) -> bool:
        """Delete or archive one committed file; True when done (also if already done)."""
        fs = self.fs
        try:
            if not fs.exists(path):
                return True
            if self.settings["cleanSource"] == "delete":
                fs.rm_file(path)
            else:
                archive = fs._strip_protocol(self.settings["sourceArchiveDir"])
                target = posixpath.join(archive, path.lstrip("/"))
                fs.makedirs(posixpath.dirname(target), exist_ok=True)
                fs.mv(path, target)
        except OSError:
            return False
        return True


def _partition_fields(files: list[ListedFile]) -> list[pa.Field]:
    values: dict[str, list[str]] = {}
    for file in files:
        for key, value in file.partition:
            values.setdefault(key, []).append(value)
    return [pa.field(key, _partition_type(found)) for key, found in values.items()]


def _partition_type(values: list[str]) -> pa.DataType:
    for kind, parse in ((pa.int64(), int), (pa.float64(), float)):
        try:
            for value in values:
                parse(value)
        except ValueError:
            continue
        return kind
    return pa.string()
