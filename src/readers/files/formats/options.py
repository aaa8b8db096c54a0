"""The options of the file formats, with the names of formats, codecs and modes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NoReturn

import pyarrow as pa
from pyspark.sql.datasource import Filter

from readers.files.formats.lines import overlaps_itself
from sources.errors import InvalidOptionError

__all__ = ["COMPRESSIONS", "FORMATS", "MODES", "SOURCE", "FormatOptions", "invalid_option"]

FORMATS = ("parquet", "csv", "json", "text")
"""The format names, in the order errors list them."""

COMPRESSIONS = ("infer", "none", "gzip", "bz2", "zstd")
"""``infer`` (from the file's extension), ``none``, or a codec."""

MODES = ("FAILFAST", "PERMISSIVE", "DROPMALFORMED")
"""What a malformed CSV or JSON record does: fail the read, or be kept as nulls, or dropped."""

_LINE_SEP_FORMATS = ("csv", "json", "text")
"""The formats whose lines end at ``lineSep`` (CSV's at one character, as in Spark)."""

SOURCE = "splitsource.files"
"""The format name that errors about the options name."""


def invalid_option(option: str, problem: str) -> NoReturn:
    """Raise the :class:`~sources.errors.InvalidOptionError` of ``option``."""
    raise InvalidOptionError(SOURCE, option, problem)


@dataclass(frozen=True)
class FormatOptions:
    """How to decode files of one format into ``data_schema``.

    ``data_schema`` lists the columns stored in the files with their exact
    target types and nullability; every batch :func:`~readers.files.formats.read_range`
    returns has exactly this schema. Parquet and JSON columns are matched by name (a column
    missing from a file reads as nulls if nullable, else fails); CSV columns by
    position; ``text`` has a single string (or binary) column, ``value`` in
    Spark. ``header``, ``sep``, ``quote`` (``""`` turns quoting off),
    ``escape``, ``comment``, ``null_value``, ``empty_value``, the white-space
    trims, ``max_columns`` and ``infer_schema`` apply to CSV, whose values read
    as in Spark 4: an empty value and a value equal to ``null_value`` are null,
    a quoted empty ``""`` reads as ``empty_value`` (null when it equals
    ``null_value``, as by default), booleans are ``true``/``false``, decimals
    may hold ``,`` grouping separators, blank lines are skipped and the header
    is the first line that is not blank (nor a comment). ``multi_line`` lets a
    CSV record or JSON document span lines (each file is then read whole);
    ``timestamp_format`` and ``date_format`` are strptime formats (see
    :mod:`.patterns`); ``primitives_as_string`` infers JSON scalars as strings, and
    ``drop_field_if_all_null`` leaves out JSON fields never seen with a value;
    ``whole_text`` reads each text file as one value; ``merge_schema`` infers a
    Parquet schema from every file; ``line_sep``, any text that cannot overlap
    itself (for CSV one character, not ``\\r`` nor ``\\n``), ends lines instead of
    ``\\n`` (``"\\n"`` keeps a ``\\r`` before it in a text line).
    ``compression`` is ``"infer"`` (from the extension ``.gz``, ``.bz2``,
    ``.zst``/``.zstd``), ``"none"`` or a codec, and is ignored for Parquet.
    ``mode`` (one of :data:`MODES`) applies to CSV and JSON records. A column
    of ``data_schema`` named ``corrupt_column`` is not read from the files: it
    is null, and holds the raw text of malformed records with ``PERMISSIVE``.
    Batches have at most ``batch_rows`` rows. Invalid values raise
    :class:`~sources.errors.InvalidOptionError` naming the option. Each field but
    ``data_schema``, ``batch_rows``, ``extra_values_malformed`` and ``row_filters`` is
    filled by the option of ``splitsource.files`` that says it lands there
    (:data:`sources.files.format_options.FORMAT_OPTIONS`); a new field needs that option.

    Examples
    --------
    >>> import pyarrow as pa
    >>> FormatOptions("csv", pa.schema([("id", pa.int64())]), header=True).sep
    ','
    """

    format: str
    data_schema: pa.Schema
    header: bool = False
    sep: str = ","
    quote: str = '"'
    escape: str | None = None
    compression: str = "infer"
    batch_rows: int = 65_536
    mode: str = "PERMISSIVE"
    corrupt_column: str = "_corrupt_record"
    infer_schema: bool = False
    prefer_date: bool = True
    """CSV ``infer_schema``: type values of ``date_format`` (by default ``yyyy-MM-dd``) as
    dates; False tries them as timestamps, as Spark's ``preferDate=false``."""
    enforce_schema: bool = True
    """CSV with ``header``: False checks each file's header against the names of
    ``data_schema`` (less the corrupt-record column), as Spark's ``enforceSchema=false``."""
    comment: str | None = None
    null_value: str = ""
    empty_value: str = ""
    nan_value: str = "NaN"
    positive_inf: str = "Inf"
    negative_inf: str = "-Inf"
    """CSV: the texts a ``float`` or ``double`` column reads as NaN and infinities, besides
    the texts Java's ``Double.parseDouble`` reads (``NaN``, ``Infinity``, ``-Infinity``)."""
    ignore_leading_white_space: bool = False
    ignore_trailing_white_space: bool = False
    max_columns: int = 20_480
    multi_line: bool = False
    timestamp_format: str | None = None
    date_format: str | None = None
    time_zone: str = "UTC"
    """The zone CSV and JSON timestamp text without an offset is read in, for columns of
    Arrow timestamps with a zone (Spark's ``timestamp``); as :func:`.zones.parse_zone_id`
    gives it."""
    primitives_as_string: bool = False
    drop_field_if_all_null: bool = False
    whole_text: bool = False
    merge_schema: bool = False
    datetime_rebase_mode: str = "CORRECTED"
    """Parquet: ``CORRECTED`` (Spark 4's default) reads a date before 1582-10-15 or a
    timestamp before 1900 as written; ``EXCEPTION`` fails on one in a file Spark did not
    write (as Spark's, whose calendar changed in 3.0)."""
    int96_rebase_mode: str = "CORRECTED"
    """Parquet: the same for INT96 timestamps before 1900."""
    line_sep: str | None = None
    extra_values_malformed: bool = True
    """CSV: a record with more values than the schema is malformed (Spark's rule, which
    ``mode`` and the corrupt record column act on); False reads the schema's first columns
    of wider records without decoding the rest (PERMISSIVE with no corrupt column)."""
    row_filters: tuple[Filter, ...] = ()
    """Spark's pushed filters: Parquet row groups their statistics rule out are not read."""

    def __post_init__(self) -> None:
        if self.format not in FORMATS:
            invalid_option("format", f"'{self.format}' is not one of {', '.join(FORMATS)}")
        if self.compression not in COMPRESSIONS:
            invalid_option(
                "compression", f"'{self.compression}' is not one of {', '.join(COMPRESSIONS)}"
            )
        if len(self.sep) != 1:
            invalid_option("sep", f"{self.sep!r} must be exactly one character")
        if len(self.quote) > 1:
            invalid_option(
                "quote", f"{self.quote!r} must be one character, or empty for no quoting"
            )
        if self.escape is not None and len(self.escape) != 1:
            invalid_option("escape", f"{self.escape!r} must be exactly one character")
        if self.batch_rows < 1:
            invalid_option("batch_rows", f"{self.batch_rows} must be at least 1")
        if self.comment is not None and len(self.comment) != 1:
            invalid_option("comment", f"{self.comment!r} must be exactly one character")
        if self.max_columns < 1:
            invalid_option("maxColumns", f"{self.max_columns} must be at least 1")
        if self.line_sep is not None:
            self._check_line_sep(self.line_sep)
        if self.mode not in MODES:
            invalid_option("mode", f"'{self.mode}' is not one of {', '.join(MODES)}")

    def _check_line_sep(self, line_sep: str) -> None:
        """Raise InvalidOptionError for a ``lineSep`` this reader cannot read as Spark."""
        if line_sep == "":
            invalid_option("lineSep", "cannot be empty (as in Spark); leave it unset for \\n")
        if self.format not in _LINE_SEP_FORMATS:
            invalid_option(
                "lineSep",
                f"{line_sep!r} is not supported for format {self.format}, which has no lines",
            )
        if self.format == "csv" and (len(line_sep) != 1 or line_sep in "\r\n"):
            invalid_option(
                "lineSep",
                f"{line_sep!r} is not supported for format csv: one character other than "
                "\\r and \\n is (Spark also takes two, and then loses values after a line "
                "break inside a record); leave it unset to end records at \\n or \\r\\n",
            )
        if self.format == "csv" and self.multi_line:
            invalid_option(
                "lineSep",
                "is not supported for csv with multiLine; leave it unset to end records at "
                "\\n or \\r\\n, or read without multiLine",
            )
        if overlaps_itself(line_sep.encode()):
            invalid_option(
                "lineSep",
                f"{line_sep!r} can overlap itself (two of it can share characters), so a file "
                "could not be cut into splits that agree where lines end; use a separator "
                "whose start differs from its end (such as '|;')",
            )
