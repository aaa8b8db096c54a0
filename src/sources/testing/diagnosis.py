"""What a failed stream case says beyond "rows lost": where they were, and which method
the evidence blames.

A case in Spark sees a broken contract only as rows lost or repeated. Once it fails,
:func:`diagnose` looks again without Spark, on the input the case read: it reads each
split alone to say which records of which split were lost or repeated, and runs the
checks that name a method (:mod:`sources.testing.contracts`). A cause is named as
likely only when one of those checks fails; otherwise the case's contract lists the
possible ones, saying that none is certain.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from pathlib import Path
from typing import Any

from enumerators.base import EnumeratorContext, PeriodicSplitEnumerator, ReadMode
from sources.ddl import parse_ddl
from sources.spark.partitions import arrow_schema
from sources.split import Boundedness, SourceSplit
from sources.testing.cases import Diagnosis, read_all_of, rows_of, source_of
from sources.testing.context import ConformanceContext
from sources.testing.contracts import check_enumerator_checkpoint, check_split_ranges

__all__ = ["diagnose"]

_ROUNDS = 8
"""``next_splits`` calls that drain an enumerator."""


def diagnose(
    context: ConformanceContext,
    options: Mapping[str, Any],
    directory: Path,
    lost: Counter[Hashable],
    repeated: Counter[Hashable],
) -> Diagnosis:
    """Where ``lost`` and ``repeated`` rows are in the input of a stream read with
    ``options``, and the first failing check without Spark on that input (its state
    under ``directory``)."""
    try:
        where = _where(context, options, lost, repeated)
    except Exception as error:  # the diagnosis must not hide the case's own failure
        where = f"not found ({type(error).__name__}: {error})"
    return Diagnosis(where, _evidence(context, options, directory))


def _where(
    context: ConformanceContext,
    options: Mapping[str, Any],
    lost: Counter[Hashable],
    repeated: Counter[Hashable],
) -> str:
    source = source_of(context, options)
    declared = source.schema()
    schema = arrow_schema(parse_ddl(declared) if isinstance(declared, str) else declared)
    wrong = {"lost": lost, "repeated": repeated}
    placed: dict[str, list[str]] = {"lost": [], "repeated": []}
    seen: set[Hashable] = set()
    for split in _splits(source):
        rows = rows_of(context, read_all_of(source.create_reader(schema), [split]))
        seen.update(rows)
        for kind, kind_rows in wrong.items():
            ordinals = [n for n, row in enumerate(rows) if row in kind_rows]
            if ordinals:
                placed[kind].append(f"split {split.split_id} {_spans(ordinals, len(rows))}")
    parts = [
        f"{kind}: " + "; ".join(found[:5]) + " (counted in the order the reader reads a split)"
        for kind, found in placed.items()
        if found
    ]
    nowhere = len(set(lost) - seen)
    if nowhere:
        parts.append(
            f"{nowhere} lost row(s) in no split as the reader reads each alone (the reader "
            "drops them, or no split the enumerator hands out holds them)"
        )
    return ". ".join(parts)


def _splits(source: Any) -> list[SourceSplit]:
    """Every split of the input, unbounded ones up to the positions readable now."""
    bounded = Boundedness.BOUNDED in source.supported_boundedness
    enumerator = source.create_enumerator(
        EnumeratorContext(ReadMode.BATCH if bounded else ReadMode.STREAM)
    )
    enumerator.start()
    try:
        if isinstance(enumerator, PeriodicSplitEnumerator):
            enumerator.handle_discovered_splits(enumerator.discover_more_splits())
        splits = [split for _ in range(_ROUNDS) for split in enumerator.next_splits()]
        unbounded = [split for split in splits if split.end_position() is None]
        ends = enumerator.latest_positions(unbounded) if unbounded else {}
    finally:
        enumerator.close()
    return [
        split.with_range(split.start_position(), ends[split.split_id])
        if split.split_id in ends
        else split
        for split in splits
    ]


def _spans(ordinals: Sequence[int], total: int) -> str:
    """``ordinals`` (sorted) as ranges of a split's ``total`` records: ``records 3-9, 12 of 20``."""
    spans: list[tuple[int, int]] = []
    for n in ordinals:
        if spans and n == spans[-1][1] + 1:
            spans[-1] = (spans[-1][0], n)
        else:
            spans.append((n, n))
    shown = [f"{a}-{b}" if b > a else f"{a}" for a, b in spans[:3]]
    more = ", ..." if len(spans) > 3 else ""
    return f"records {', '.join(shown)}{more} of {total}"


def _evidence(
    context: ConformanceContext, options: Mapping[str, Any], directory: Path
) -> str | None:
    """The first line of the first check without Spark that fails on this input."""
    fresh = {**options, "stateLocation": str(directory / "diagnosis-state")}
    checks = ((check_split_ranges, fresh), (check_enumerator_checkpoint, options))
    for check, given in checks:
        try:
            check(context, given)
        except AssertionError as error:
            return str(error).splitlines()[0]
        except Exception:  # a check that cannot run on this input is no evidence
            continue
    return None
