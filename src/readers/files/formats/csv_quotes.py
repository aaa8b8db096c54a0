"""CSV quotes as Spark's parser reads them, in the lines where pyarrow's parser differs.

Spark's parser (univocity, with Spark's ``unescapedQuoteHandling=STOP_AT_DELIMITER``)
reads a quoted value followed by other text before the separator as its raw text up
to the separator (``"a"b`` is ``"a"b``; pyarrow reads ``ab``), drops white space
between a closing quote and the separator (``"a" ,`` is ``a``), and with
``ignoreLeadingWhiteSpace`` reads a quote after white space as opening a quoted value
(`` "a,b"`` is ``a,b``). :func:`spark_quoted` finds the lines where that may happen in
numpy, from the bytes around each run of quotes, tokenizes only those lines in Python
as Spark does, and writes them again as plain CSV, which pyarrow reads as Spark does.

It misses a quoted value that ends with the separator and is followed by text
(``"a,"b``), and a quote after an escaped escape (``"a\\\\"b``). Records that span
lines (``multiLine``) are left as they are.
"""

from __future__ import annotations

import numpy as np

from readers.files.formats.options import FormatOptions

__all__ = ["WHITE_SPACE", "spark_quoted"]

WHITE_SPACE = "".join(map(chr, range(0x21)))
"""What Spark's parser skips as white space: characters up to U+0020."""
_LINE_FEED, _CARRIAGE_RETURN = 0x0A, 0x0D


def spark_quoted(data: bytes, options: FormatOptions) -> bytes:
    """``data``, whole lines, with the lines whose quotes pyarrow reads otherwise than
    Spark written so that it reads them as Spark does; ``data`` itself if there are none."""
    quote = options.quote.encode()
    if options.multi_line or len(quote) != 1 or quote not in data:
        return data
    pieces, written = [], 0
    for start, end in _irregular_lines(data, options):
        line = data[start:end]
        pieces += [data[written:start], _as_spark_reads(line, options)]
        written = end
    if not pieces:
        return data
    pieces.append(data[written:])
    return b"".join(pieces)


def _irregular_lines(data: bytes, options: FormatOptions) -> list[tuple[int, int]]:
    """The ``(start, end)`` of the lines (without their line break) that have a run of
    quotes that is not one of: opening a value (after a separator or at the start of the
    line, odd), closing one (before a separator or the line's end, odd), doubled quotes
    inside one (even), an empty value (``""`` between separators), or escaped."""
    bytes_ = np.frombuffer(data, dtype=np.uint8)
    quotes = np.flatnonzero(bytes_ == ord(options.quote))
    firsts = np.ones(len(quotes), dtype=bool)
    firsts[1:] = np.diff(quotes) > 1
    starts = quotes[firsts]
    ends = np.append(quotes[np.flatnonzero(firsts)[1:] - 1], quotes[-1]) + 1
    before = np.where(starts > 0, bytes_[np.maximum(starts - 1, 0)], _LINE_FEED)
    after = np.where(ends < len(bytes_), bytes_[np.minimum(ends, len(bytes_) - 1)], _LINE_FEED)
    opens, closes = _bound(before, options), _bound(after, options)
    odd = (ends - starts) % 2 == 1
    regular = (opens & (odd | closes)) | (closes & odd) | (~opens & ~closes & ~odd)
    if options.escape not in (None, options.quote):
        regular |= before == ord(options.escape)
    irregular = starts[~regular]
    if not len(irregular):
        return []
    line_feeds = np.flatnonzero(bytes_ == _LINE_FEED)
    lines = np.unique(np.searchsorted(line_feeds, irregular))
    # Line i starts after line feed i - 1 and ends at line feed i, or the data's end: data
    # without a line feed (one record, as a malformed record is salvaged) is one line.
    line_starts = np.concatenate(([0], line_feeds + 1))[lines]
    line_ends = np.append(line_feeds, len(data))[lines]
    return [
        (int(start), int(end) - (data[end - 1 : end] == b"\r"))
        for start, end in zip(line_starts, line_ends, strict=True)
    ]


def _bound(characters: np.ndarray, options: FormatOptions) -> np.ndarray:
    """Per character, whether it is a separator or a line break (faster than ``np.isin``)."""
    bound: np.ndarray = (
        (characters == ord(options.sep))
        | (characters == _LINE_FEED)
        | (characters == _CARRIAGE_RETURN)
    )
    return bound


def _as_spark_reads(line: bytes, options: FormatOptions) -> bytes:
    """``line`` written as plain CSV of the values Spark reads from it; as it is if it has
    a lone ``\\r`` or a quoted value that does not end (malformed either way)."""
    text = line.decode("utf-8", "surrogateescape")
    tokens = None if "\r" in text else _tokens(text, options)
    if tokens is None:
        return line
    written = options.sep.join(_written(token, quoted, options) for token, quoted in tokens)
    return written.encode("utf-8", "surrogateescape")


def _tokens(text: str, options: FormatOptions) -> list[tuple[str, bool]] | None:
    """The values of the line ``text`` as Spark's parser reads them, each with whether it
    was quoted; None if a quoted value does not close."""
    tokens = []
    position = 0
    while True:
        start = position
        if options.ignore_leading_white_space:
            while start < len(text) and _skipped(text[start], options):
                start += 1
        if text.startswith(options.quote, start):
            quoted = _quoted(text, start, options)
            if quoted is None:
                return None
            token, end = quoted
        else:
            end = _separator(text, start, options)
            token = (text[position:end], False)
        tokens.append(token)
        if end == len(text):
            return tokens
        position = end + 1


def _skipped(character: str, options: FormatOptions) -> bool:
    """Whether ``character`` is white space Spark skips (not the separator, if a tab)."""
    return character in WHITE_SPACE and character != options.sep


def _separator(text: str, start: int, options: FormatOptions) -> int:
    """Where the value from ``start`` ends: at the next separator, or the line's end."""
    found = text.find(options.sep, start)
    return len(text) if found < 0 else found


def _quoted(text: str, start: int, options: FormatOptions) -> tuple[tuple[str, bool], int] | None:
    """The value opening with a quote at ``start``, with whether Spark reads it as quoted,
    and where it ends; None if its quote does not close.

    A doubled quote, or a quote after ``escape``, is a quote of the value. After the
    closing quote, white space is dropped; other text makes the value ``STOP_AT_DELIMITER``
    reads: unquoted, as written up to the separator.
    """
    quote = options.quote
    characters = []
    index = start + 1
    while index < len(text) and not _closes(text, index, quote):
        escaped = text[index] in (quote, options.escape) and text.startswith(quote, index + 1)
        characters.append(quote if escaped else text[index])
        index += 2 if escaped else 1
    if index == len(text):
        return None
    value = "".join(characters)
    end = _separator(text, index + 1, options)
    rest = text[index + 1 : end]
    if not rest.strip(WHITE_SPACE):
        return (value, True), end
    return (f"{quote}{value}{quote}{rest}", False), end


def _closes(text: str, index: int, quote: str) -> bool:
    """Whether the character at ``index`` of a quoted value is its closing quote."""
    return text[index] == quote and not text.startswith(quote, index + 1)


def _written(token: str, quoted: bool, options: FormatOptions) -> str:
    """``token`` as a CSV value pyarrow reads back as it is; quoted if it was (which
    decides how an empty value and ``nullValue`` read) or if it has to be."""
    quote, escape = options.quote, options.escape
    special = {options.sep, quote, "\n", "\r"} | ({escape} if escape else set())
    if not quoted and not any(character in special for character in token):
        return token
    if escape not in (None, quote):
        token = token.replace(escape, escape * 2)
    return f"{quote}{token.replace(quote, quote * 2)}{quote}"
