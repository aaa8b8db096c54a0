"""Compressed text files: which codec a file is compressed with."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

__all__ = ["EXTENSIONS", "codec_of", "whole_file_extensions"]

EXTENSIONS: Mapping[str, str] = MappingProxyType(
    {".gz": "gzip", ".bz2": "bz2", ".zst": "zstd", ".zstd": "zstd"}
)
"""The codec that ``compression=infer`` reads a file with, by its extension."""


def codec_of(path: str, compression: str) -> str | None:
    """The codec of ``path`` under the ``compression`` option, or None if not compressed."""
    if compression == "none":
        return None
    if compression != "infer":
        return compression
    lower = path.lower()
    for extension, codec in EXTENSIONS.items():
        if lower.endswith(extension):
            return codec
    return None


def whole_file_extensions(compression: str) -> tuple[str, ...] | None:
    """The extensions of the files :func:`codec_of` finds compressed; None for every file."""
    if compression == "none":
        return ()
    if compression == "infer":
        return tuple(EXTENSIONS)
    return None
