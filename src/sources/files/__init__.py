"""The files connector: Spark's file formats read through fsspec and pyarrow."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sources.exports import exported

if TYPE_CHECKING:
    from sources.files.source import FileSource as FileSource

__getattr__ = exported(__name__, {"FileSource": "source"})
