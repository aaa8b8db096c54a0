"""``HybridSource``: several sources read as one, one after the other (Flink's FLIP-150).

Every source but the last must be read to an end (bounded); when one ends, a
switch hook may derive the next source's start from where it ended (the
archive's last offsets → Kafka's starting offsets). A subclass declares its
sources as :class:`HybridStage`s, each configured by the options under its
prefix; :mod:`enumerators.hybrid.enumerator` switches, :mod:`readers.hybrid.reader` reads.

Checked at ``load()``: every source but the last supports bounded reads, and the
sources' schemas agree, or a stage that projects has every column of the
hybrid's schema (the first source's) in a type that casts safely to it.

A source that cannot tell its schema yet (files: none under the path) does not stop
a read that is given its schema with ``.schema(...)``, nor one whose hybrid knows a
stand-in (:meth:`HybridSource.schema_when_unknown`); without either, ``load()``
fails with the source's error, its options named with the stage's prefix.

Examples
--------
>>> from sources.numbers.source import NumberSequenceSource
>>> from sources.testing import read_all
>>> class TwoRuns(HybridSource):
...     name = "two-runs"
...     stages = (
...         HybridStage(NumberSequenceSource, "first."),
...         HybridStage(
...             NumberSequenceSource,
...             "then.",
...             start=lambda switch: {"from": str(switch.previous.end + 1)},
...         ),
...     )
>>> read_all(TwoRuns, {"first.to": 2, "then.to": 5})["value"].to_pylist()
[0, 1, 2, 3, 4, 5]
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import pyarrow as pa
from pyspark.sql.types import StructType

from enumerators.base import EnumeratorContext
from enumerators.hybrid.enumerator import (
    HybridEnumerator,
    HybridState,
    HybridStateSerializer,
    SwitchContext,
    SwitchHook,
)
from readers.hybrid.reader import HybridSplitReader
from sources.api import Source
from sources.capabilities import (
    SupportsCountedRecords,
    SupportsPinning,
    SupportsPlanRefinement,
    SupportsSplitLabels,
    SupportsStorageOptions,
    counts_records,
    pin,
    proportional_record_limit,
    refined_plan,
    split_labels,
    storage_options_for,
    takes_record_limits,
    unpinned,
)
from sources.ddl import parse_ddl
from sources.errors import (
    InvalidOptionError,
    SchemaMismatchError,
    SourceDefinitionError,
    SourceUnavailableError,
    SplitSourceError,
)
from sources.framework_options import READ_OPTIONS, STREAM_OPTIONS
from sources.hybrid.splits import HybridSplit, HybridSplitSerializer
from sources.options import Option, Options
from sources.prefixed_options import PrefixedOptions
from sources.spark.partitions import arrow_schema
from sources.split import Boundedness
from sources.tuning import Tuning

__all__ = ["HybridSource", "HybridStage", "SwitchContext"]

FRAMEWORK_OPTIONS = tuple(option.name for option in (*READ_OPTIONS, *STREAM_OPTIONS))
"""Options of the whole read (admission, state, partitioning): given without a prefix."""


@dataclass(frozen=True)
class HybridStage:
    """One source of a hybrid: its class, the prefix of its options, how it starts.

    Examples
    --------
    >>> from sources.numbers.source import NumberSequenceSource
    >>> HybridStage(NumberSequenceSource, "first.").prefix
    'first.'
    """

    source_class: type[Source[Any, Any]]
    """The source; built from the hybrid's options under ``prefix``, the prefix taken off."""

    prefix: str
    """Its options' prefix, ending in a dot (``archive.`` → ``archive.path`` is ``path``)."""

    start: SwitchHook | None = None
    """Derives this source's start options from the source before it, once that one ended;
    ``None`` starts it as its own options say. Unused for the first source."""

    project: bool = False
    """Read the hybrid's columns from this source's rows by name, casting safely, instead of
    requiring the same schema: its other columns are dropped."""

    defaults: Mapping[str, str] = field(default_factory=dict)
    """Options this source gets unless the user gives them under ``prefix``."""

    doc: str = ""
    """What the options table of the docs says of this source's options, after "every option
    of" the source; its ``defaults`` are listed after it."""


class HybridSource(
    SupportsCountedRecords[HybridSplit],
    SupportsPlanRefinement[HybridSplit],
    SupportsPinning,
    SupportsSplitLabels,
    SupportsStorageOptions,
    Source[HybridSplit, HybridState],
):
    """Reads ``stages`` one after the other as one source; see the module docstring.

    A subclass sets ``name`` and ``stages``; its options are each stage's under the
    stage's prefix, plus any it declares in ``extra_options`` (read them in
    :meth:`configure`). Admission limits, ``stateLocation`` and the other options of
    every splitsource read are given once, without a prefix, and apply on both sides; so
    is a stage's ``proportional_record_limit`` (Kafka's ``maxOffsetsPerTrigger``), which
    shares by Spark's rule only while that stage's splits are read. A hybrid takes record
    limits if a stage does.
    """

    stages: ClassVar[Sequence[HybridStage]] = ()
    """The sources, in reading order; every one but the last must support bounded reads."""

    extra_options: ClassVar[Sequence[Option]] = ()
    """Options of the hybrid itself, beside the stages' prefixes."""

    stage_option_names: ClassVar[tuple[PrefixedOptions, ...]] = ()
    """Each stage's options as the user names them (its prefix, less the options of the
    whole read): what its errors are rewritten with."""

    proportional_record_limit: ClassVar[Option | None] = None
    """The first stage's proportional limit
    (:attr:`~sources.capabilities.SupportsRecordLimits.proportional_record_limit`)."""

    supported_boundedness = frozenset({Boundedness.BOUNDED, Boundedness.CONTINUOUS_UNBOUNDED})

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not cls.stages:
            return
        cls.options = (
            *(
                Option.prefixed(
                    stage.prefix, f"options of {stage.source_class.format_name()}"
                ).listed(_stage_listing(stage), shown="")
                for stage in cls.stages
            ),
            *cls.extra_options,
        )
        cls.supported_boundedness = frozenset(cls.stages[-1].source_class.supported_boundedness)
        aliases: dict[str, str] = {}
        for stage in cls.stages:
            aliases.update(
                {
                    a: n
                    for a, n in stage.source_class.option_aliases.items()
                    if n in FRAMEWORK_OPTIONS
                }
            )
        cls.option_aliases = aliases
        limits = [proportional_record_limit(stage.source_class) for stage in cls.stages]
        cls.proportional_record_limit = next((o for o in limits if o is not None), None)
        whole = {name.lower() for name in cls._whole_read_options()}
        cls.stage_option_names = tuple(
            PrefixedOptions.of(
                stage.prefix,
                (o.name for o in stage.source_class.options if o.name.lower() not in whole),
            )
            for stage in cls.stages
        )
        tunings = [stage.source_class.tuning for stage in cls.stages]
        cls.tuning = Tuning(
            max_partition_bytes=tunings[0].max_partition_bytes,
            max_records_per_batch=max(t.max_records_per_batch or 0 for t in tunings) or None,
            state_location_required=any(t.state_location_required for t in tunings),
        )

    def __init__(
        self, stage_options: Sequence[Mapping[str, str]], sources: Sequence[Source[Any, Any]]
    ) -> None:
        self.stage_options = tuple(dict(options) for options in stage_options)
        self.sources = tuple(sources)
        # A task may read splits of every stage: read as far ahead as any of them.
        self.tuning = replace(
            type(self).tuning, read_ahead=max(source.tuning.read_ahead for source in sources)
        )
        self._started: dict[tuple[int, tuple[tuple[str, str], ...]], Source[Any, Any]] = {}
        self._unknown: dict[int, SplitSourceError] = {}
        """Why a source cannot tell its schema, by index."""
        self._schemas: list[StructType | None] = []
        for index, source in enumerate(self.sources):
            try:
                self._schemas.append(_struct(source.schema()))
            except SplitSourceError as error:
                self._unknown[index] = error
                stand_in = self.schema_when_unknown(index)
                self._schemas.append(None if stand_in is None else _struct(stand_in))

    @classmethod
    def from_options(cls, options: Options) -> HybridSource:
        if len(cls.stages) < 2:
            raise SourceDefinitionError(
                f"{cls.__name__}.stages must list at least two HybridStage(...), got "
                f"{len(cls.stages)}"
            )
        stage_options = [
            {**{k.lower(): v for k, v in stage.defaults.items()}, **options[stage.prefix]}
            for stage in cls.stages
        ]
        sources = [cls._build_stage(index, given) for index, given in enumerate(stage_options)]
        for index, source in enumerate(sources[:-1]):
            if Boundedness.BOUNDED not in source.supported_boundedness:
                stage = cls.stages[index]
                raise InvalidOptionError(
                    cls.format_name(),
                    f"{stage.prefix}*",
                    f"configures {source.format_name()}, which cannot be read to an end; "
                    "every source but the last must support bounded reads, so make it the "
                    "last source or use a bounded one",
                )
        hybrid = cls(stage_options, sources)
        hybrid.configure(options)
        hybrid.check_schemas()
        return hybrid

    def configure(self, options: Options) -> None:
        """Take the values of ``extra_options`` and check them with the stages; no-op here."""

    def schema_when_unknown(self, index: int) -> StructType | str | None:
        """A stand-in for the schema of source ``index`` when it cannot tell its own
        (files: none under the path yet); ``None``, the default, has none.

        A source without a schema has splits only later, if at all: a stream over an
        empty first source switches to the next at its first batch. Without a stand-in,
        a read needs the user's ``.schema(...)``.
        """
        return None

    @classmethod
    def _build_stage(cls, index: int, given: Mapping[str, str]) -> Source[Any, Any]:
        try:
            source, _ = cls.stages[index].source_class.from_spark_options(given, ())
        except InvalidOptionError as error:
            raise cls._stage_option_error(index, error) from None
        return source

    @classmethod
    def _whole_read_options(cls) -> tuple[str, ...]:
        """The options given without a prefix though a stage's source declares them."""
        proportional = cls.proportional_record_limit
        return (
            *FRAMEWORK_OPTIONS,
            *cls.option_aliases,
            *([] if proportional is None else [proportional.name]),
        )

    @classmethod
    def _stage_option_error(cls, index: int, error: InvalidOptionError) -> InvalidOptionError:
        """``error`` of source ``index`` as the hybrid's: the option under the stage's prefix."""
        stage = cls.stages[index]
        option, problem = error.option, error.problem
        whole = {name.lower(): name for name in cls._whole_read_options()}
        if option.lower() in whole:
            option = whole[option.lower()]
            problem = f"applies to the whole read: give it as '{option}', without a prefix"
        return InvalidOptionError(
            cls.format_name(),
            stage.prefix + option,
            problem,
            [stage.prefix + name for name in error.valid],
        )

    def check_schemas(self) -> None:
        """Raise ``SchemaMismatchError`` naming the column and both types where they differ.

        Sources that cannot tell their schema are left out: the read's schema (the user's)
        decides what they read.
        """
        target = self._schemas[0]
        if target is None:
            return
        first = self.stage_name(0)
        for index in range(1, len(self.sources)):
            stage, schema = self.stages[index], self._schemas[index]
            if schema is None:
                continue
            names = {f.name: f for f in schema.fields}
            for column in target.fields:
                found = names.get(column.name)
                if found is None:
                    raise SchemaMismatchError(
                        f"Column '{column.name}' ({_sql(column)}) of {first} is missing from "
                        f"{self.stage_name(index)}, whose columns are "
                        f"{', '.join(names)}; every source of {self.format_name()} must "
                        "produce the first one's columns"
                    )
                if found.dataType == column.dataType:
                    continue
                if not stage.project or not _casts(found, column):
                    fix = (
                        "the types do not cast safely"
                        if stage.project
                        else "make the types agree, or have the stage project (project=True)"
                    )
                    raise SchemaMismatchError(
                        f"Column '{column.name}' is {_sql(column)} in {first} but "
                        f"{_sql(found)} in {self.stage_name(index)}: {fix}"
                    )
            extra = [name for name in names if name not in target.names]
            if extra and not stage.project:
                raise SchemaMismatchError(
                    f"Column '{extra[0]}' of {self.stage_name(index)} is not a column of "
                    f"{first}; every source of {self.format_name()} must produce the same "
                    "columns, or the stage must project (project=True)"
                )

    def stage_schema(self, index: int) -> pa.Schema:
        """The Arrow schema source ``index`` produces on its own, or its stand-in.

        Raises
        ------
        SplitSourceError
            Why the source cannot tell its schema, if it cannot and has no stand-in.
        """
        return arrow_schema(self._known_schema(index))

    def _known_schema(self, index: int) -> StructType:
        schema = self._schemas[index]
        if schema is not None:
            return schema
        error = self._unknown[index]
        if isinstance(error, InvalidOptionError):
            raise self._stage_option_error(index, error) from error
        with self.prefixed_options(index).naming_errors():
            raise error

    # --- HybridStages, for the enumerator ----------------------------------------------

    def stage_count(self) -> int:
        return len(self.sources)

    def stage_name(self, index: int) -> str:
        """The stage as messages name it: ``'archive.*' (splitsource.files)``."""
        return f"'{self.stages[index].prefix}*' ({self.sources[index].format_name()})"

    def prefixed_options(self, index: int) -> PrefixedOptions:
        """The options of stage ``index`` as the user names them, for its errors."""
        return self.stage_option_names[index]

    def stage_source(self, index: int, start: Mapping[str, str]) -> Source[Any, Any]:
        if not start:
            return self.sources[index]
        key = (index, tuple(sorted(start.items())))
        if key not in self._started:
            given = {**self.stage_options[index], **{k.lower(): v for k, v in start.items()}}
            self._started[key] = self._build_stage(index, given)
        return self._started[key]

    def stage_start(self, index: int, context: SwitchContext[Any]) -> Mapping[str, str]:
        hook = self.stages[index].start
        return {} if hook is None else hook(context)

    # --- Source --------------------------------------------------------------------------

    def schema(self) -> StructType | str:
        """The first source's schema (or its stand-in); called only without ``.schema(...)``.

        Raises
        ------
        InvalidOptionError
            The first source cannot tell its schema and has no stand-in: give ``.schema(...)``.
        """
        return self._known_schema(0)

    def pin(self) -> None:
        for source in self.sources:
            pin(source)

    def unpinned(self) -> HybridSource:
        without = copy.copy(self)
        without.sources = tuple(unpinned(source) for source in self.sources)
        without._started = {}
        return without

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_started": {}}

    def split_labels(self, split_id: str) -> Mapping[str, str]:
        """The labels its own source gives split ``split_id`` ("<stage index>:<its id>")."""
        index, _, inner = split_id.partition(":")
        if not index.isdigit() or int(index) >= len(self.sources):
            return {}
        return split_labels(self.sources[int(index)], inner)

    def takes_record_limits(self) -> bool:
        """Yes if a stage does (Kafka after an archive of files)."""
        return any(takes_record_limits(source) for source in self.sources)

    def split_counts_records(self, split: HybridSplit) -> bool:
        """As its own source says: Kafka's offsets count records, archive files do not."""
        return counts_records(self.sources[split.index], split.split)

    def create_enumerator(self, context: EnumeratorContext) -> HybridEnumerator:
        with self.prefixed_options(0).naming_errors():
            inner = self.sources[0].create_enumerator(context)
        return HybridEnumerator(self, context, HybridState(0, None), inner)

    def restore_enumerator(
        self, context: EnumeratorContext, state: HybridState
    ) -> HybridEnumerator:
        with self.prefixed_options(state.index).naming_errors():
            source = self.stage_source(state.index, state.start)
            inner = source.restore_enumerator(context, state.state)
        return HybridEnumerator(self, context, state, inner)

    def refine_plan(self, splits: Sequence[HybridSplit]) -> list[HybridSplit]:
        refined: list[HybridSplit] = []
        for index, source in enumerate(self.sources):
            mine = [split.split for split in splits if split.index == index]
            if mine:
                refined += [HybridSplit(index, s) for s in refined_plan(source, mine)]
        return refined

    def as_unavailable(self, error: Exception) -> SourceUnavailableError | None:
        """An outage of any stage's system, as that stage's source says."""
        for source in self.sources:
            outage = source.as_unavailable(error)
            if outage is not None:
                return outage
        return super().as_unavailable(error)

    def create_reader(self, schema: pa.Schema) -> HybridSplitReader:
        factories = []
        for index, source in enumerate(self.sources):
            known = self._schemas[index]
            own = schema if known is None else arrow_schema(known)
            missing = [name for name in schema.names if name not in own.names]
            if missing:
                raise SchemaMismatchError(
                    f"Column '{missing[0]}' of the read's schema is not a column of "
                    f"{self.stage_name(index)}; read only columns every source has"
                )
            # Each source reads the columns asked for in its own types; the runtime casts.
            read = pa.schema([own.field(name) for name in schema.names])
            factories.append(_factory(source, read))
        return HybridSplitReader(factories, self.stage_option_names)

    def split_serializer(self) -> HybridSplitSerializer:
        return HybridSplitSerializer([source.split_serializer() for source in self.sources])

    def enumerator_state_serializer(self) -> HybridStateSerializer:
        return HybridStateSerializer(
            [source.enumerator_state_serializer() for source in self.sources]
        )

    def storage_options_for(self, url: str) -> Mapping[str, Any]:
        for source in self.sources:
            found = storage_options_for(source, url)
            if found:
                return found
        return {}


def _stage_listing(stage: HybridStage) -> str:
    """A stage's row in a docs table: every option of its source, its doc, its defaults."""
    listing = f"every option of `{stage.source_class.format_name()}`"
    if stage.doc:
        listing += f", {stage.doc}"
    if stage.defaults:
        given = ", ".join(f"`{stage.prefix}{k}={v}`" for k, v in stage.defaults.items())
        listing += f"; defaults of its own: {given}"
    return listing


def _factory(source: Source[Any, Any], schema: pa.Schema) -> Any:
    return lambda: source.create_reader(schema)


def _struct(schema: StructType | str) -> StructType:
    return parse_ddl(schema) if isinstance(schema, str) else schema


def _sql(field: Any) -> str:
    return str(field.dataType.simpleString()).upper()


def _casts(found: Any, column: Any) -> bool:
    """Whether every value of ``found``'s type has one of ``column``'s: the same kind, no
    narrower (integers and floats widen, integers become floats, binary and strings turn
    into each other, timestamps and dates change unit)."""
    source = arrow_schema(StructType([found]))[0].type
    target = arrow_schema(StructType([column]))[0].type
    t = pa.types
    if source == target:
        return True
    if t.is_integer(source) and t.is_integer(target):
        signed = bool(t.is_signed_integer(target))
        if signed == bool(t.is_signed_integer(source)):
            return bool(target.bit_width >= source.bit_width)
        return signed and bool(target.bit_width > source.bit_width)
    if (t.is_integer(source) or t.is_floating(source)) and t.is_floating(target):
        return bool(not t.is_floating(source) or target.bit_width >= source.bit_width)
    texts = (t.is_binary, t.is_large_binary, t.is_string, t.is_large_string)
    if any(check(source) for check in texts) and any(check(target) for check in texts):
        return True
    return bool((t.is_timestamp(source) or t.is_date(source)) and t.is_timestamp(target))
