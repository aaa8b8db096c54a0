"""Declared options: parsing and validating the strings a user passes to Spark.

A source lists its options as :class:`Option` values; splitsource parses the
user's ``.option(...)`` strings against them at ``load()`` and rejects unknown
or invalid ones with a message that names the option and lists the valid ones.
Option names match case-insensitively, as everywhere in Spark.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeVar

from sources.errors import InvalidOptionError

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

__all__ = ["Listing", "Option", "Options", "filled_config", "parse_options"]

ConfigT = TypeVar("ConfigT", bound="DataclassInstance")


class _Required:
    """The default of an option the user must give; shown as ``REQUIRED`` in signatures."""

    def __repr__(self) -> str:
        return "REQUIRED"


_REQUIRED: Any = _Required()

_SIZE_UNITS = MappingProxyType(
    {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
)
_SIZE = re.compile(r"^\s*(\d+)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)
_UNIT_NAMES = {
    0.001: ("ms", "millisecond", "milliseconds"),
    1.0: ("s", "sec", "secs", "second", "seconds"),
    60.0: ("m", "min", "mins", "minute", "minutes"),
    3600.0: ("h", "hour", "hours"),
    86400.0: ("d", "day", "days"),
}
_DURATION_UNITS = MappingProxyType(
    {name: seconds for seconds, names in _UNIT_NAMES.items() for name in names}
)
"""Units of a duration: short ones, and Spark's interval words (``1 minute``)."""
_DURATION = re.compile(
    r"^\s*(\d+(?:\.\d+)?)\s*("
    + "|".join(sorted(_DURATION_UNITS, key=len, reverse=True))
    + r")?\s*$",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Listing:
    """How an option's row in a docs table reads, beyond its name and declared default.

    Examples
    --------
    >>> Listing("supported", formats="csv", spark="`false`").shown is None
    True
    """

    notes: str
    """The last cell: what the option means, or how it compares with Spark's."""

    shown: str | None = None
    """The default as the table shows it, when showing the declared value would not
    read well (``128m`` rather than 134217728); ``None`` shows the declared value."""

    formats: str = ""
    """File options: the formats the option applies to."""

    spark: str = ""
    """Options Spark also has: Spark's default, as the table shows it."""


@dataclass(frozen=True)
class Option:
    """One option a source accepts: its name, how to parse it, its default and its meaning.

    A source lists its options in ``Source.options``; build each with one of the
    constructors below (``Option.integer``, ``Option.size``, ...). An option without
    a ``default`` is required. Names match the user's ``.option(...)`` keys in any case.

    Examples
    --------
    >>> to = Option.integer("to", "last number, inclusive")
    >>> to.required, to.parse(" 42 ")
    (True, 42)
    """

    name: str
    """The option's name as users give it (matched in any case)."""

    parse: Callable[[str], Any]
    """Turns the user's string into the value; raises ``ValueError`` saying what is wrong."""

    doc: str
    """One line for users, shown when the option is missing and in docs tables."""

    default: Any = _REQUIRED
    """The value when the user gives none; ``REQUIRED`` makes the option required."""

    lands: str | None = None
    """The field of the source's typed config that the parsed value fills, if it fills
    one as it is; of a source with several configs, the field of that name in each one
    that has it (see :func:`filled_config`)."""

    listing: Listing | None = None
    """Its row in the docs table of the source's options, if it has one."""

    def lands_in(self, field: str) -> Option:
        """This option, filling the typed config's field ``field`` with its value
        (:func:`filled_config` makes a config of the options that land in it).

        Examples
        --------
        >>> Option.boolean("header", "names in the first line", False).lands_in("header").lands
        'header'
        """
        return replace(self, lands=field)

    def listed(
        self, notes: str, *, shown: str | None = None, formats: str = "", spark: str = ""
    ) -> Option:
        """This option, with its row in a docs table (see :class:`Listing`).

        Examples
        --------
        >>> Option.integer("splits", "how many", 1).listed("at least 1").listing.notes
        'at least 1'
        """
        return replace(self, listing=Listing(notes, shown, formats, spark))

    @property
    def required(self) -> bool:
        """True when the user must give this option."""
        return self.default is _REQUIRED

    @property
    def is_prefix(self) -> bool:
        """True for a family of options such as ``kafka.*``, named by a prefix ending in a dot."""
        return self.name.endswith(".")

    @classmethod
    def prefixed(cls, prefix: str, doc: str) -> Option:
        """Every option whose name starts with ``prefix`` (ending in a dot), passed through.

        The parsed value is a dict of the names after the prefix, in lower case, to
        their string values, such as ``{"bootstrap.servers": "host:9092"}`` for
        ``kafka.bootstrap.servers``; empty when none is given.

        Raises
        ------
        ValueError
            If ``prefix`` does not end in a dot.

        Examples
        --------
        >>> Option.prefixed("kafka.", "passed to the Kafka client").is_prefix
        True
        """
        if not prefix.endswith("."):
            raise ValueError(f"an option prefix ends with a dot, got '{prefix}'")
        return cls(prefix, str, doc, default=None)

    @classmethod
    def string(cls, name: str, doc: str, default: Any = _REQUIRED) -> Option:
        """A free-form string option.

        Examples
        --------
        >>> Option.string("topic", "the topic to read", default="events").default
        'events'
        """
        return cls(name, str, doc, default)

    @classmethod
    def integer(
        cls,
        name: str,
        doc: str,
        default: Any = _REQUIRED,
        minimum: int | None = None,
        maximum: int | None = None,
    ) -> Option:
        """A whole number, optionally with bounds (``minimum`` and ``maximum`` inclusive).

        Examples
        --------
        >>> Option.integer("splits", "how many splits", default=1, minimum=1).parse("0")
        Traceback (most recent call last):
        ...
        ValueError: must be at least 1, got 0
        """

        def parse(text: str) -> int:
            try:
                value = int(text.strip())
            except ValueError:
                raise ValueError(f"expected a whole number, got '{text}'") from None
            if minimum is not None and value < minimum:
                raise ValueError(f"must be at least {minimum}, got {value}")
            if maximum is not None and value > maximum:
                raise ValueError(f"must be at most {maximum}, got {value}")
            return value

        return cls(name, parse, doc, default)

    @classmethod
    def size(cls, name: str, doc: str, default: Any = _REQUIRED) -> Option:
        """A positive byte size such as ``134217728``, ``128m`` or ``1g``; parsed to bytes.

        Examples
        --------
        >>> Option.size("maxBytes", "bytes per batch").parse("64m")
        67108864
        """

        def parse(text: str) -> int:
            match = _SIZE.match(text)
            if not match or int(match.group(1)) <= 0:
                raise ValueError(f"expected a positive size such as 64m or 1g, got '{text}'")
            return int(match.group(1)) * _SIZE_UNITS[match.group(2).lower()]

        return cls(name, parse, doc, default)

    @classmethod
    def duration(cls, name: str, doc: str, default: Any = _REQUIRED) -> Option:
        """A duration (``500ms``, ``30s``, ``5m``, ``1 minute``, ``1h``, ``7d`` or bare
        seconds) in seconds.

        Examples
        --------
        >>> Option.duration("pollInterval", "how often to poll", default=1.0).parse("500ms")
        0.5
        >>> Option.duration("delay", "how long to wait", default=None).parse("2 minutes")
        120.0
        """

        def parse(text: str) -> float:
            match = _DURATION.match(text)
            if not match:
                raise ValueError(
                    f"expected a duration such as 500ms, 30s, 5m, 1 minute or 7d, got '{text}'"
                )
            return float(match.group(1)) * _DURATION_UNITS[(match.group(2) or "s").lower()]

        return cls(name, parse, doc, default)

    @classmethod
    def secret_json_object(cls, name: str, doc: str, default: Any = _REQUIRED) -> Option:
        """A JSON object that may hold credentials, such as fsspec storage options.

        A value that is not a JSON object is refused without being echoed.

        Examples
        --------
        >>> Option.secret_json_object("storageOptions", "fsspec options").parse('{"anon": true}')
        {'anon': True}
        """

        def parse(text: str) -> dict[str, Any]:
            try:
                value = json.loads(text)
            except ValueError:
                value = None
            if not isinstance(value, dict):
                raise ValueError('expected a JSON object such as {"anon": true} (value not shown)')
            return value

        return cls(name, parse, doc, default)

    @classmethod
    def choice(
        cls, name: str, doc: str, choices: Sequence[str], default: Any = _REQUIRED
    ) -> Option:
        """One of ``choices`` (lower case), in any case; parsed to lower case.

        Examples
        --------
        >>> Option.choice("mode", "on bad records", ["permissive", "failfast"]).parse("FailFast")
        'failfast'
        """

        def parse(text: str) -> str:
            value = text.strip().lower()
            if value not in choices:
                raise ValueError(f"expected one of {', '.join(choices)}, got '{text}'")
            return value

        return cls(name, parse, doc, default)

    @classmethod
    def boolean(cls, name: str, doc: str, default: Any = _REQUIRED) -> Option:
        """``true`` or ``false``, in any case.

        Examples
        --------
        >>> Option.boolean("header", "first line names the columns", default=False).parse("TRUE")
        True
        """

        def parse(text: str) -> bool:
            lowered = text.strip().lower()
            if lowered not in ("true", "false"):
                raise ValueError(f"expected true or false, got '{text}'")
            return lowered == "true"

        return cls(name, parse, doc, default)


class Options(Mapping[str, Any]):
    """Parsed option values by declared name; every declared option is present.

    ``Source.from_options`` receives one: a read-only mapping holding the parsed
    value, or the default, of each of the source's own options (not the framework's).

    Examples
    --------
    >>> from sources.numbers.source import NumberSequenceSource
    >>> source = NumberSequenceSource.from_options(Options({"from": 1, "to": 3, "splits": 1}))
    >>> source.end
    3
    """

    def __init__(self, values: Mapping[str, Any]) -> None:
        self._values = dict(values)

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def __iter__(self) -> Any:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"Options({self._values!r})"


def parse_options(
    source: str,
    declared: Iterable[Option],
    given: Mapping[str, str],
    aliases: Mapping[str, str] = MappingProxyType({}),
) -> Options:
    """Parse ``given`` against ``declared``; unknown, missing or bad values raise.

    ``source`` names the source in error messages (its format name). ``aliases`` maps
    other names users may give (any case) to declared options; an error names the
    option as the user gave it.

    Examples
    --------
    >>> limit = Option.integer("maxRecordsPerTrigger", "most records", None, minimum=1)
    >>> aliases = {"maxMessagesPerTrigger": "maxRecordsPerTrigger"}
    >>> parse_options("splitsource.test", [limit], {"MAXMESSAGESPERTRIGGER": "9"}, aliases)
    Options({'maxRecordsPerTrigger': 9})
    >>> parse_options("splitsource.test", [limit], {"maxMessagesPerTrigger": "0"}, aliases)
    Traceback (most recent call last):
    ...
    sources.errors.InvalidOptionError: Option 'maxMessagesPerTrigger' of splitsource.test: must
    be at least 1, got 0. Valid options for splitsource.test: maxRecordsPerTrigger.
    """
    by_key = {option.name.lower(): option for option in declared}
    valid = [option.name + ("*" if option.is_prefix else "") for option in by_key.values()]
    named_by = {alias.lower(): name.lower() for alias, name in aliases.items()}
    prefixes = [option for option in by_key.values() if option.is_prefix]
    values: dict[str, Any] = {option.name: {} for option in prefixes}
    for key, text in given.items():
        family = next((o for o in prefixes if key.lower().startswith(o.name.lower())), None)
        if family is not None:
            values[family.name][key[len(family.name) :].lower()] = text
            continue
        option = by_key.get(named_by.get(key.lower(), key.lower()))
        if option is None:
            raise InvalidOptionError(source, key, _unknown(key, by_key), valid)
        try:
            values[option.name] = option.parse(text)
        except ValueError as error:
            named = option.name if key.lower() == option.name.lower() else key
            raise InvalidOptionError(source, named, str(error), valid) from None
    for option in by_key.values():
        if option.name in values:
            continue
        if option.required:
            problem = f"is required ({option.doc})"
            if option.name == "path":
                problem += ": give load(path) or .option('path', ...)"
            raise InvalidOptionError(source, option.name, problem, valid)
        values[option.name] = option.default
    return Options(values)


def filled_config(
    config: type[ConfigT], declared: Iterable[Option], options: Mapping[str, Any], **derived: Any
) -> ConfigT:
    """The dataclass ``config`` made of parsed ``options``: each option of ``declared``
    that lands in one of its fields (:meth:`Option.lands_in`) fills that field with its
    value, and ``derived`` gives the fields no option fills as it is.

    Raises
    ------
    TypeError
        If a field is filled by neither, or by both.

    Examples
    --------
    >>> from dataclasses import dataclass
    >>> @dataclass(frozen=True)
    ... class Retries:
    ...     count: int
    ...     source: str
    >>> declared = [Option.integer("retries", "how many", 3).lands_in("count")]
    >>> filled_config(Retries, declared, Options({"retries": 5}), source="splitsource.test")
    Retries(count=5, source='splitsource.test')
    """
    fields = {field.name for field in dataclasses.fields(config)}
    landed = {option.lands: options[option.name] for option in declared if option.lands in fields}
    return config(**landed, **derived)


def _unknown(key: str, by_key: Mapping[str, Option]) -> str:
    """The problem with option ``key``, which no option declares: unknown, and which
    declared name it is likely a misspelling of (Spark passes names in lower case)."""
    close = difflib.get_close_matches(key.lower(), by_key, n=1, cutoff=0.75)
    return (
        f"unknown option (did you mean '{by_key[close[0]].name}'?)" if close else "unknown option"
    )
