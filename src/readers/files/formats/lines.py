"""Split alignment of the text formats: which lines of a file a byte range owns.

A split is the byte range ``[start, start + length)`` of a file. The ranges of
one file's splits are consecutive and cover ``[0, size)``; whatever the cut,
every record is read by exactly one split, in file order.

*Text formats* (``csv``, ``json`` Lines, ``text``): a line is the bytes from a
line start up to and including the next ``\\n`` (or the end of the file); the
line starts are offset 0 and every offset right after a ``\\n``, except the end
of the file. **A line belongs to the split in which its first byte lies.** So
a split with ``start > 0`` skips everything up to and including the first
``\\n`` at or after ``start - 1`` (if byte ``start - 1`` is that ``\\n``, the
line starting at ``start`` is its own), and every split reads the lines that
start at or before ``start + length - 1``, finishing its last one past the end
of the range (Hadoop's ``LineRecordReader`` rule). A boundary inside ``\\r\\n``,
right after a ``\\n`` or in an empty line needs no special case: only ``\\n``
separates lines, and a ``\\r`` right before it (or at the end of the file) is
part of the line ending. A lone ``\\r`` does not end a line. The ``header``
line of a CSV file (its first line that is not blank nor a comment, as in
Spark) is skipped by the split that starts at byte 0, the only one that sees
it. The same rule cuts a range into blocks of whole lines of about
``chunk_bytes`` for decoding, so memory stays bounded whatever the file size.
A record must not span lines: a CSV value with a line break inside quotes, or
a JSON object over several lines, is malformed (Spark's ``multiLine=false``).
With ``multiLine=true`` a file is one split, decoded as one block, whose
records the format finds (:meth:`~readers.files.formats.malformed.LineCodec.record_ends`).

*Parquet* (:mod:`readers.files.formats.parquet`): a row group belongs to the split
containing its midpoint byte (its first page's offset plus half its compressed
size), as in Spark.

*Compressed* text files (gzip, bz2, zstd) cannot be cut: one split reads the
whole file, with ``start == 0``.

*Another separator* (``lineSep``) takes the place of ``\\n`` in the rule: a line
ends after each occurrence of its bytes, and a split with ``start > 0`` skips
through the first occurrence that ends at or after ``start`` (it reads from
``start - len(separator)``). A separator that cannot overlap itself (``|;``, not
``||``) has the same occurrences wherever a search starts, so every cut agrees.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from readers.files.formats.opening import short_file_error

__all__ = [
    "DEFAULT_CHUNK_BYTES",
    "NEWLINE",
    "Block",
    "LineBlocks",
    "line_count",
    "line_ends",
    "line_feed_ends",
    "overlaps_itself",
    "peeker",
    "separator_count",
    "separator_starts",
]

NEWLINE = b"\n"
"""The line separator unless ``lineSep`` gives another."""

DEFAULT_CHUNK_BYTES = 8 << 20
"""How many bytes of a text file are decoded at a time (rounded to whole lines)."""

_TAIL_BYTES = 64 << 10  # read past the end of a range to finish its last line
_PEEK_BYTES = 64 << 10  # looked at ahead of a chunk's end for the last line's end
_REMEMBERED_BYTES = 4 * DEFAULT_CHUNK_BYTES  # the largest block whose line feeds are kept
_COUNTED_BYTES = 1 << 20  # bytes compared at a time when counting a separator


@dataclass(frozen=True)
class Block:
    """Whole lines of a file: ``data`` starts at ``offset`` (of the decompressed stream)."""

    data: bytes
    offset: int
    line: int | None  # number of the first line, when the split starts at byte 0
    separator: bytes = NEWLINE

    def where(self, start: int) -> str:
        """The record starting at byte ``start`` of the block, for people."""
        if self.line is not None:
            before = self.data.count(self.separator, 0, start)
            return f"line {self.line + before}"
        return f"the line starting at byte {self.offset + start}"


class LineBlocks:
    """Cuts a stream into blocks of the whole lines a split owns (the module's rule).

    ``read`` reads from ``begin``: ``start - 1`` for a split with ``start > 0``,
    else 0. ``end`` is None for a stream read to its end. ``header``, if given,
    tells the header line from the lines before it (true for the header): the
    split at byte 0 skips through the header. ``whole`` makes the rest of the
    stream one block (a split of a whole file, whose records span lines).
    ``separator`` ends lines (see the module). ``peek``, if given, reads ``size`` bytes
    at an offset of the stream without moving ``read`` (a local file's ``read_at``):
    each chunk then ends at a line's end, and its lines are a block without a copy.
    ``position`` and ``line`` say how far it got, for error messages.
    """

    def __init__(
        self,
        read: Callable[[int], bytes],
        start: int,
        end: int | None,
        header: Callable[[bytes], bool] | None,
        chunk_bytes: int,
        path: str,
        whole: bool = False,
        separator: bytes = NEWLINE,
        peek: Callable[[int, int], bytes] | None = None,
    ) -> None:
        self._read = read
        self._peek = None if whole else peek
        self._start = start
        self._end = end
        self._header = header if start == 0 else None
        self._whole = whole
        self._chunk = chunk_bytes
        self._path = path
        self._separator = separator
        self.position = max(start - len(separator), 0)
        self.line: int | None = 1 if start == 0 else None
        self._read_at = self.position

    def _pull(self) -> bytes:
        """The next chunk; near the end of the range only enough to finish the last line."""
        size = self._chunk
        if self._end is not None and self._read_at + size > self._end:
            size = min(size, max(self._end - self._read_at, 0) + _TAIL_BYTES)
        elif self._peek is not None:
            size = self._through_last_separator(self._peek, size)
        data = self._read(size)
        self._read_at += len(data)
        return data

    def _through_last_separator(self, peek: Callable[[int, int], bytes], size: int) -> int:
        """``size``, less the bytes after the last separator that ends in the next ``size``
        (``size`` if the look ahead finds none)."""
        window = min(_PEEK_BYTES, size)
        found = peek(window, self._read_at + size - window).rfind(self._separator)
        return size if found < 0 else size - window + found + len(self._separator)

    def __iter__(self) -> Iterator[Block]:
        end = self._end
        if self._header is not None:
            data = self._skip_header(self._header)
        else:
            data = self._skip_first_line() if self._start > 0 else b""
        if data is None:
            return
        if self._whole:
            parts = [data]
            while more := self._pull():
                parts.append(more)
            yield self._emit(b"".join(parts))
            self._at_eof()
            return
        separator = self._separator
        width = len(separator)
        pending: list[bytes] = []  # the start of a line whose end is not read yet
        while True:
            if end is not None and self.position >= end:
                return
            last = _last_separator(pending, data, separator)
            if last is None:
                if data:
                    pending.append(data)
            else:
                carried = sum(map(len, pending))
                if end is not None and self.position + carried + last + width >= end:
                    buffer = b"".join((*pending, data)) if pending else data
                    cut = buffer.find(separator, max(end - self.position - width, 0)) + width
                    yield self._emit(buffer[:cut])
                    return
                # One copy: the carried start of a line and the new lines through the last
                # separator, joined without slicing ``data`` first.
                through = last + width
                if pending:
                    block = b"".join((*pending, memoryview(data)[:through]))
                else:
                    block = data[:through]  # ``data`` itself when it ends with the separator
                pending = [data[through:]] if through < len(data) else []
                yield self._emit(block)
            data = self._pull()
            if not data:
                if pending:
                    yield self._emit(b"".join(pending))
                self._at_eof()
                return

    def _skip_first_line(self) -> bytes | None:
        """Skip through the first separator; return what follows it, or None at the end."""
        separator = self._separator
        carry = b""  # the end of what was skipped, where a separator may begin
        while True:
            data = self._pull()
            if not data:
                self._at_eof()
                return None
            searched = carry + data if carry else data
            found = searched.find(separator)
            if found >= 0:
                self.position += found + len(separator) - len(carry)
                return searched[found + len(separator) :]
            self.position += len(data)
            carry = searched[len(searched) - len(separator) + 1 :]

    def _skip_header(self, is_header: Callable[[bytes], bool]) -> bytes | None:
        """Skip through the first line ``is_header`` accepts; return what follows it, or None."""
        data = b""
        separator = self._separator
        while True:
            newline = data.find(separator)
            if newline < 0:
                more = self._pull()
                if not more:
                    self.position += len(data)
                    self._at_eof()
                    return None
                data = data + more if data else more  # most headers lie in the first chunk
                continue
            line, data = data[:newline], data[newline + len(separator) :]
            self.position += newline + len(separator)
            if self.line is not None:
                self.line += 1
            if is_header(line):
                return data

    def _emit(self, data: bytes) -> Block:
        block = Block(data, self.position, self.line, self._separator)
        self.position += len(data)
        if self.line is not None:
            self.line += separator_count(data, self._separator)
        return block

    def _at_eof(self) -> None:
        if self._end is not None and self.position < self._end:
            raise short_file_error(self._path, self.position, self._start, self._end)


def peeker(file: pa.NativeFile) -> Callable[[int, int], bytes]:
    """A ``peek`` for :class:`LineBlocks` over ``file``, a random-access file: it reads
    ``size`` bytes at ``offset`` and leaves the file's position as it was."""

    def peek(size: int, offset: int) -> bytes:
        here = file.tell()
        data: bytes = file.read_at(size, offset)
        file.seek(here)  # pyarrow wants a seek after read_at before the next read
        return data

    return peek


def _last_separator(pending: list[bytes], data: bytes, separator: bytes) -> int | None:
    """Where the last separator of the bytes of ``pending`` and ``data`` starts, relative to
    ``data`` (below 0: across the two), if it ends in ``data``; else None."""
    found = data.rfind(separator)
    if found >= 0:
        return found
    if len(separator) == 1 or not pending:
        return None
    # Each pending piece holds a byte at least: the last width - 1 pieces hold the tail.
    tail = b"".join(pending[1 - len(separator) :])[1 - len(separator) :]
    across = (tail + data[: len(separator) - 1]).find(separator)
    return None if across < 0 else across - len(tail)


def separator_starts(data: bytes, separator: bytes) -> np.ndarray:
    """Where each occurrence of ``separator`` in ``data`` starts (one that cannot overlap
    itself, see :func:`overlaps_itself`)."""
    bytes_ = np.frombuffer(data, dtype=np.uint8)
    starts = np.flatnonzero(bytes_[: max(len(data) - len(separator) + 1, 0)] == separator[0])
    for index, byte in enumerate(separator[1:], start=1):
        starts = starts[bytes_[starts + index] == byte]
    return starts


def overlaps_itself(separator: bytes) -> bool:
    """Whether two occurrences of ``separator`` can overlap (``||`` in ``|||``)."""
    return any(separator[shift:] == separator[:-shift] for shift in range(1, len(separator)))


def line_ends(data: bytes, separator: bytes = NEWLINE) -> np.ndarray:
    """Exclusive end offsets of the lines of ``data`` (each after its separator, or the end)."""
    if separator == NEWLINE:
        ends = line_feed_ends(data)
    else:
        ends = separator_starts(data, separator) + len(separator)
    if data and not data.endswith(separator):
        ends = np.append(ends, len(data))
    return ends


def separator_count(data: bytes, separator: bytes = NEWLINE) -> int:
    """How many times ``separator`` occurs in ``data`` (one that cannot overlap itself).

    A one-byte separator is counted by numpy, several times as fast as ``bytes.count``
    on the blocks of a split.
    """
    if separator == NEWLINE:
        return _line_feeds.count(data)
    if len(separator) != 1:
        return data.count(separator)
    return _byte_count(data, separator[0])


def _byte_count(data: bytes, byte: int) -> int:
    """How many times ``byte`` occurs in ``data``, compared a slice at a time: the
    memory of one slice's result is reused for the next, where comparing a whole block
    at once faults in a fresh array of the block's size."""
    values = np.frombuffer(data, dtype=np.uint8)
    return sum(
        int(np.count_nonzero(values[at : at + _COUNTED_BYTES] == byte))
        for at in range(0, len(values), _COUNTED_BYTES)
    )


class _LineFeeds:
    """The line feeds of the block looked at last, kept with the block itself.

    A block's line feeds are counted when it is cut (for line numbers), then counted or
    located again by its decoder's checks; remembering them for the same ``bytes`` object
    (by identity, which cannot match stale data while the object is held) spares those
    passes over 8 MiB.
    """

    def __init__(self) -> None:
        # One tuple (data, count, ends or None), replaced whole: other threads never see a mix.
        self._last: tuple[bytes, int, np.ndarray | None] = (b"", 0, None)

    def count(self, data: bytes) -> int:
        """How many ``\\n`` ``data`` holds."""
        block, count, _ = self._last
        if block is not data:
            count = _byte_count(data, 0x0A)
            self._remember(data, count, None)
        return count

    def ends(self, data: bytes) -> np.ndarray:
        """The offsets right after each ``\\n`` of ``data``, in order (read-only)."""
        block, _, ends = self._last
        if block is not data or ends is None:
            ends = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == 0x0A) + 1
            ends.flags.writeable = False
            self._remember(data, len(ends), ends)
        return ends

    def _remember(self, data: bytes, count: int, ends: np.ndarray | None) -> None:
        # A whole file read as one block (multiLine) is not kept alive after its read.
        self._last = (data, count, ends) if len(data) <= _REMEMBERED_BYTES else (b"", 0, None)


_line_feeds = _LineFeeds()
line_feed_ends = _line_feeds.ends


def line_count(data: bytes) -> int:
    """How many lines ``data`` holds, empty ones included."""
    return separator_count(data) + (1 if data and data[-1:] != b"\n" else 0)
