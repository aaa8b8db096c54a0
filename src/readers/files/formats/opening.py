"""Opening files for decoding, and the errors that name a file."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

import fsspec
import pyarrow as pa
from fsspec.implementations.local import LocalFileSystem

from sources.errors import CorruptFileError, FileReadError, MissingFileError
from sources.files.filesystems import strip_protocol

__all__ = ["FIX", "detail", "missing_file_error", "open_input", "short_file_error"]

FIX = "Fix or remove the file; ignoreCorruptFiles=true skips corrupt files."
"""What a message about a corrupt file advises."""

_ROW_MENTION = re.compile(r"\s*\bin row \d+\s*$")


@contextmanager
def open_input(fs: fsspec.AbstractFileSystem, path: str) -> Iterator[pa.NativeFile]:
    """Open ``path`` for reading as an Arrow file, natively on the local filesystem."""
    try:
        if isinstance(fs, LocalFileSystem):
            native = pa.OSFile(strip_protocol(path), "rb")
            raw = None
        else:
            raw = fs.open(path, "rb")
            native = pa.PythonFile(raw, mode="r")
    except FileNotFoundError as error:
        raise missing_file_error(path) from error
    except PermissionError as error:
        raise unreadable_file_error(path, error) from error
    except FileReadError:
        raise
    except OSError as error:
        raise FileReadError(f"Cannot open '{path}': {error}") from error
    try:
        yield native
    except FileNotFoundError as error:
        raise missing_file_error(path) from error
    except PermissionError as error:
        raise unreadable_file_error(path, error) from error
    finally:
        native.close()
        if raw is not None:
            raw.close()


def missing_file_error(path: str) -> MissingFileError:
    """The error for ``path``, listed but gone before it was read."""
    return MissingFileError(
        f"File '{path}' does not exist any more: it was listed, then deleted or renamed "
        "before it was read (a spark.read DataFrame reads the files listed when it was "
        "defined: load() again to read the files there now). ignoreMissingFiles=true "
        "skips files that disappear."
    )


def unreadable_file_error(path: str, error: PermissionError) -> FileReadError:
    """The error for ``path``, which the storage refuses to let this process read."""
    return FileReadError(
        f"No permission to read '{path}' ({error}). Give the Spark executors read access "
        "to it (credentials in storageOptions or the executors' environment); it is not "
        "a corrupt file, so ignoreCorruptFiles does not skip it."
    )


def short_file_error(path: str, size: int, start: int, end: int) -> CorruptFileError:
    """The error for ``path``, ``size`` bytes long, shorter than its split ``[start, end)``."""
    return CorruptFileError(
        f"File '{path}' is {size} bytes long, shorter than the split [{start}, {end}) "
        "planned for it: it was truncated or replaced after it was listed. "
        "Read it again from a fresh listing; files must not change once written."
    )


def detail(error: BaseException) -> str:
    """A pyarrow error message made to fit in ours: one line, no row counted from a block."""
    text = " ".join(str(error).split())
    return _ROW_MENTION.sub("", text).rstrip(".")
