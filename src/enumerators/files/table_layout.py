"""Which directories of a listing are Hive partitions, by Spark's partition discovery.

Spark (``PartitioningUtils.parsePartitions``) looks at each directory that holds data
files and walks up from it towards the base directories (the paths, or ``basePath``):
``key=value`` names are its partition, read from the innermost up to the first name
that is not one, or to a base. When no directory has a partition, the table is not
partitioned; otherwise every directory must reach the same base and name the same
columns, and only the files of partition directories are read.
"""

from __future__ import annotations

import posixpath
from collections.abc import Collection, Iterable, Mapping

from sources.errors import DirectoryLayoutError
from sources.files.partitioning import Partition

__all__ = ["is_hidden", "partition_directories"]

_WHAT_TO_DO = (
    "Keep data files only in the partition directories of the table (move or delete the "
    "others), give basePath the table's root directory when the paths are partition "
    "directories, read each table on its own and union them, or set "
    "recursiveFileLookup=true to read every file without partition columns."
)


def is_hidden(name: str) -> bool:
    """Whether Spark's listing leaves out a file or directory of this name: ``.x``,
    ``_x`` unless it holds ``=`` (``_SUCCESS``, not ``_day=1``), and ``x._COPYING_``."""
    return (
        (name.startswith("_") and "=" not in name)
        or name.startswith(".")
        or name.endswith("._COPYING_")
    )


def partition_directories(
    directories: Iterable[str], bases: Collection[str]
) -> dict[str, Partition]:
    """The partition of each of ``directories`` (those holding data files) that is one.

    Empty when no directory has a partition: then the table is not partitioned. Raises
    :class:`~sources.errors.DirectoryLayoutError` when the directories do not form one
    partitioned table: they reach different bases, or name different columns (compared
    regardless of case; the first directory's spelling names the column).
    """
    walked = {directory: _walk(directory, bases) for directory in sorted(directories)}
    partitions = {directory: pairs for directory, (pairs, _) in walked.items() if pairs}
    if not partitions:
        return {}
    _check_one_base({directory: base for directory, (_, base) in walked.items()})
    return _same_columns(partitions)


def _walk(directory: str, bases: Collection[str]) -> tuple[Partition, str]:
    """The ``key=value`` pairs of ``directory``, outermost first, and where the walk ended:
    a base, the first name above the pairs that is not one, or ``directory`` if no pairs."""
    pairs: list[tuple[str, str]] = []
    current = directory
    while current not in bases:
        pair = _pair(current)
        if pair is None and pairs:
            break
        if pair is not None:
            pairs.append(pair)
        parent = posixpath.dirname(current)
        if parent in ("", current):
            break
        current = parent
    return (tuple(reversed(pairs)), current) if pairs else ((), directory)


def _pair(directory: str) -> tuple[str, str] | None:
    name = posixpath.basename(directory)
    key, equals, value = name.partition("=")
    if not equals:
        return None
    if not key or not value:
        missing = "column name before" if not key else "value after"
        raise DirectoryLayoutError(
            f"Directory '{directory}' has no partition {missing} '=' (Spark fails such a read "
            "too): rename it to column=value, or set recursiveFileLookup=true to read its "
            "files without partition columns."
        )
    return key, value


def _check_one_base(bases: Mapping[str, str]) -> None:
    """Fail unless every directory's walk ended at the same base (Spark: regardless of case)."""
    by_base: dict[str, str] = {}
    for directory, base in bases.items():
        by_base.setdefault(base.lower(), directory)
    if len(by_base) > 1:
        found = "; ".join(
            f"'{directory}' below '{bases[directory]}'" for directory in by_base.values()
        )
        raise DirectoryLayoutError(
            "Conflicting directory structures: the directories holding data files are not "
            f"partitions of one table ({found}); Spark fails such a read too. " + _WHAT_TO_DO
        )


def _same_columns(partitions: Mapping[str, Partition]) -> dict[str, Partition]:
    """``partitions``, failing unless all name the same columns; spelled as the first."""
    first_directory, first = next(iter(partitions.items()))
    names = [key for key, _ in first]
    for directory, pairs in partitions.items():
        if [key.lower() for key, _ in pairs] != [name.lower() for name in names]:
            raise DirectoryLayoutError(
                "Conflicting partition column names: "
                f"'{first_directory}' names ({', '.join(names)}) and '{directory}' names "
                f"({', '.join(key for key, _ in pairs)}); Spark fails such a read too. Data "
                "files must lie only in the innermost partition directories, and directories "
                "at one level must name the same column. " + _WHAT_TO_DO
            )
    return {
        directory: tuple(zip(names, (value for _, value in pairs), strict=True))
        for directory, pairs in partitions.items()
    }
