"""Malformed records: decoded data that does not fit the schema, and what ``mode`` does with it.

Errors name the file and, where known, the line (or byte offset) or row group:
:class:`~sources.errors.MissingFileError` for a file gone since it was listed,
:class:`~sources.errors.CorruptFileError` for bytes that cannot be decoded, and
:class:`~sources.errors.MalformedRecordError` for a CSV or JSON record that does
not parse or fit the schema. A record is a line; with ``multiLine`` a CSV
record ends at a line break outside quotes, and a JSON file is one record (one
document, maybe an array of rows). ``mode`` decides what a malformed record
does: ``FAILFAST`` raises, ``DROPMALFORMED`` drops it, ``PERMISSIVE`` keeps the
values that parse alone, nulls the others and puts the raw record in the
corrupt-record column, if the schema has one (as Spark does). Blocks are
decoded whole; only a block that fails is cut in halves, again and again,
down to the records that fail alone, so the cost of a malformed record is a
logarithmic number of re-decodes. Dropped or kept-as-corrupt records are
counted in one WARN log line per split.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Protocol

import numpy as np
import pyarrow as pa

from readers.arrow import (
    Data,
    MissingColumn,
    NullsInNotNullColumn,
    UnconvertibleColumn,
    fit_columns,
)
from readers.files.formats.lines import Block, line_count
from readers.files.formats.opening import detail
from readers.files.formats.options import FormatOptions
from sources.errors import MalformedRecordError

__all__ = [
    "LineCodec",
    "Malformed",
    "MalformedLines",
    "RecordCodec",
    "Unreadable",
    "add_corrupt_column",
    "check_one_per_line",
    "conform",
    "decode_located",
    "decode_tolerant",
    "joined",
    "null_row",
    "salvage_fields",
]

_LOG = logging.getLogger("splitsource.files")
_CORRUPT_BYTES = 64 << 20
"""About how much corrupt-record text one table of :func:`decode_tolerant` holds: a
malformed ``multiLine`` JSON array repeats the file's text in each of its rows."""
_FIX_RECORD = (
    "Fix the record, or read with mode=DROPMALFORMED (drop such records) or mode=PERMISSIVE "
    "(nulls, and the raw record in the columnNameOfCorruptRecord column if the schema has it)."
)


class Malformed(Exception):
    """Decoded data that does not fit the schema; the caller adds the location."""


class Unreadable(Exception):
    """A record no ``mode`` reads (a CSV record wider than ``maxColumns``): the read fails.

    ``where`` says where the record starts, for people; the caller adds the file.
    """

    def __init__(self, where: str, reason: str) -> None:
        super().__init__(f"at {where}: {reason}")


def conform(data: Data, schema: pa.Schema) -> Data:
    """``data`` with exactly ``schema``: columns by name, nulls for missing nullable ones."""
    if data.schema.equals(schema) and not any(
        not field.nullable and data.column(index).null_count for index, field in enumerate(schema)
    ):
        if data.schema.metadata == schema.metadata:
            return data
        return data.replace_schema_metadata(schema.metadata)
    if len(schema) == 0:
        return data.select([]).replace_schema_metadata(schema.metadata)
    try:
        columns = fit_columns(data, schema, missing_as_nulls=True)
    except MissingColumn as problem:
        raise Malformed(f"no value for column '{problem.target.name}', declared NOT NULL") from None
    except UnconvertibleColumn as problem:
        raise Malformed(
            f"column '{problem.target.name}' holds {problem.produced}, which does not convert "
            f"to {problem.target.type}: {detail(problem.error)}"
        ) from None
    except NullsInNotNullColumn as problem:
        raise Malformed(
            f"column '{problem.target.name}' is declared NOT NULL but has no value"
        ) from None
    return type(data).from_arrays(columns, schema=schema)


def check_one_per_line(rows: int, data: bytes, records: Callable[[bytes], int]) -> None:
    """Raise :class:`Malformed` unless ``rows``, decoded from ``data``, is one per record line.

    ``records`` counts the lines of ``data`` that hold a record; it is called
    only when ``rows`` differs from the count of all lines.
    """
    if rows == line_count(data):
        return  # the usual case: no empty lines, one record per line
    expected = records(data)
    if rows != expected:
        raise Malformed(
            f"{rows} records were read from {expected} lines: a record spans a line break "
            "(a quoted value or JSON object with a newline inside), or a line holds several"
        )


class LineCodec(Protocol):
    """Decodes whole records of a text format into a table of ``options.data_schema``.

    The decoders raise ``pa.ArrowException`` or :class:`Malformed` for data that does
    not decode.
    """

    def decode(self, data: bytes, options: FormatOptions) -> pa.Table:
        """The records of ``data``."""
        ...

    def decode_strictly(self, data: bytes, options: FormatOptions) -> pa.Table:
        """:meth:`decode`, also failing on every record that cannot be decoded alone."""
        ...

    def record_ends(self, data: bytes, options: FormatOptions) -> np.ndarray:
        """Exclusive end offsets of the records of ``data``, each after its line break.

        A failing ``data`` is cut only there; the last end is ``len(data)``.
        """
        ...

    def unreadable(self, record: bytes, options: FormatOptions) -> str | None:
        """Why no ``mode`` reads the malformed ``record`` and what to do; None if ``mode``
        applies to it."""
        ...


class RecordCodec(LineCodec, Protocol):
    """A :class:`LineCodec` whose records are of fields (csv, json): ``mode`` applies."""

    def field_texts(self, record: bytes, options: FormatOptions) -> list[bytes]:
        """Per column, a text that holds only that column's value of ``record`` (empty: none)."""
        ...

    def salvage(self, record: bytes, options: FormatOptions) -> pa.Table:
        """The rows of the malformed ``record`` (without its line break) for ``PERMISSIVE``:
        the values that parse alone, nulls for the others (as Spark)."""
        ...

    def corrupt_text(self, record: bytes, options: FormatOptions) -> str:
        """What the corrupt-record column holds for the malformed ``record`` (as Spark)."""
        ...


class MalformedLines:
    """How many malformed records a split met, and where the first one was."""

    def __init__(self) -> None:
        self.count = 0
        self.first = ""

    def add(self, block: Block, start: int) -> None:
        """Count the record of ``block`` that starts at its byte ``start``."""
        if not self.count:
            self.first = block.where(start)
        self.count += 1

    def report(self, path: str, mode: str, start: int, end: int | str) -> None:
        """Say in one WARN line what ``mode`` did with the lines counted in ``[start, end)``."""
        if not self.count:
            return
        kept = "kept as corrupt rows" if mode == "PERMISSIVE" else "dropped"
        _LOG.warning(
            "splitsource.files: mode=%s %s %d malformed line(s) of '%s' in bytes [%d, %s), "
            "the first at %s",
            mode,
            kept,
            self.count,
            path,
            start,
            end,
            self.first,
        )


def decode_located(codec: LineCodec, block: Block, path: str, options: FormatOptions) -> pa.Table:
    """Decode ``block``; on failure find the first bad record and raise a MalformedRecordError."""
    try:
        return codec.decode(block.data, options)
    except (pa.ArrowException, Malformed) as error:
        first_error: BaseException = error
    # Failures are per record, so the shortest failing prefix ends at the first bad record.
    ends = codec.record_ends(block.data, options)
    low, high = 1, len(ends)  # a prefix of `high` records fails; prefixes of fewer than `low` pass
    prefix_error = first_error
    while low < high:
        middle = (low + high) // 2
        try:
            codec.decode_strictly(block.data[: ends[middle - 1]], options)
        except (pa.ArrowException, Malformed) as error:
            high = middle
            prefix_error = error
        else:
            low = middle + 1
    bad = high - 1
    start = int(ends[bad - 1]) if bad > 0 else 0
    record = block.data[start : int(ends[bad])]
    reason = codec.unreadable(record, options)
    if reason is not None:
        raise MalformedRecordError(
            f"Cannot read {options.format} file '{path}' at {block.where(start)}: {reason}"
        ) from first_error
    text = record.rstrip(b"\r\n")
    shown = text[:80].decode("utf-8", "replace") + ("..." if len(text) > 80 else "")
    raise MalformedRecordError(
        f"Cannot read {options.format} file '{path}' at {block.where(start)} "
        f"({shown!r}): {detail(prefix_error)}. {_FIX_RECORD}"
    ) from first_error


def decode_tolerant(
    codec: RecordCodec, block: Block, options: FormatOptions, malformed: MalformedLines
) -> Iterator[pa.Table]:
    """Decode ``block`` in ``options.mode``: malformed records dropped or kept as corrupt rows.

    Raises :class:`Unreadable` for a record no mode reads.

    Tables come in record order; the rows of a corrupt record that repeat its text (a
    ``multiLine`` JSON array) come in tables of a bounded size.
    """
    file_options = replace(
        options,
        data_schema=file_schema(options),
        extra_values_malformed=options.mode != "PERMISSIVE" or has_corrupt_column(options),
    )
    try:
        whole = codec.decode(block.data, file_options)
    except (pa.ArrowException, Malformed):
        pass
    else:
        yield add_corrupt_column(whole, None, options)
        return
    ends = codec.record_ends(block.data, file_options)

    def visit(low: int, high: int, failing: bool) -> Iterator[pa.Table]:
        """Decode records ``[low, high)`` (``failing``: known to fail), halving them while
        they fail."""
        begin = int(ends[low - 1]) if low else 0
        data = block.data[begin : int(ends[high - 1])]
        if not failing:
            try:
                decoded = codec.decode_strictly(data, file_options)
            except (pa.ArrowException, Malformed):
                pass
            else:
                yield add_corrupt_column(decoded, None, options)
                return
        if high - low > 1:
            middle = (low + high) // 2
            yield from visit(low, middle, False)
            yield from visit(middle, high, False)
            return
        reason = codec.unreadable(data, file_options)
        if reason is not None:
            raise Unreadable(block.where(begin), reason)
        malformed.add(block, begin)
        if options.mode == "PERMISSIVE":
            rows = codec.salvage(data.rstrip(b"\r\n"), file_options)
            if not has_corrupt_column(options):
                yield rows
                return
            text = codec.corrupt_text(data, options)
            step = max(1, _CORRUPT_BYTES // max(1, len(text)))
            for start in range(0, rows.num_rows, step):
                # Arrow does not clip the slice of a table without columns to its rows.
                piece = rows.slice(start, min(step, rows.num_rows - start))
                yield add_corrupt_column(piece, text, options)

    yield from visit(0, len(ends), True)


def joined(pieces: list[pa.Table], schema: pa.Schema) -> pa.Table:
    """The rows of ``pieces``, tables of ``schema``, in one table."""
    if len(schema) == 0:  # Arrow counts no rows in a concatenation of no columns
        return _no_columns(sum(piece.num_rows for piece in pieces))
    return pa.concat_tables(pieces) if pieces else schema.empty_table()


def salvage_fields(codec: RecordCodec, record: bytes, options: FormatOptions) -> pa.Table:
    """One row of the values of a malformed ``record`` that parse alone; null for the others.

    As Spark's PERMISSIVE mode: a JSON field or CSV token of the wrong type, or
    missing, is null, while the rest of the record is kept.
    """
    values = []
    for field, text in zip(options.data_schema, codec.field_texts(record, options), strict=True):
        single = replace(options, data_schema=pa.schema([field]), header=False)
        try:
            column = codec.decode(text, single).column(0) if text else None
        except (pa.ArrowException, Malformed):
            column = None
        values.append(
            column if column is not None and len(column) == 1 else pa.nulls(1, field.type)
        )
    if not values:
        return _no_columns(1)
    return pa.Table.from_arrays(values, schema=options.data_schema)


def null_row(schema: pa.Schema) -> pa.Table:
    """One row of nulls of ``schema``."""
    if not len(schema):
        return _no_columns(1)
    return pa.Table.from_arrays([pa.nulls(1, field.type) for field in schema], schema=schema)


def _no_columns(rows: int) -> pa.Table:
    """A table of ``rows`` rows and no columns (built from a column, which Arrow counts)."""
    return pa.table({"": pa.nulls(rows)}).drop_columns([""])


def has_corrupt_column(options: FormatOptions) -> bool:
    """Whether ``data_schema`` has the corrupt-record column (read by record formats only)."""
    return options.corrupt_column in options.data_schema.names


def file_schema(options: FormatOptions) -> pa.Schema:
    """The columns read from the files: ``data_schema`` less the corrupt-record column."""
    if not has_corrupt_column(options):
        return options.data_schema
    return options.data_schema.remove(options.data_schema.get_field_index(options.corrupt_column))


def add_corrupt_column(table: pa.Table, raw: str | None, options: FormatOptions) -> pa.Table:
    """``table`` with the corrupt-record column (``raw`` in every row) where the schema has it."""
    if not has_corrupt_column(options):
        return table
    kind = options.data_schema.field(options.corrupt_column).type
    corrupt = pa.array([raw] * table.num_rows, kind)
    return pa.Table.from_arrays(
        [
            corrupt if field.name == options.corrupt_column else table.column(field.name)
            for field in options.data_schema
        ],
        schema=options.data_schema,
    )
