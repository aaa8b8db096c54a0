"""The options of a source read under a prefix (a hybrid's stage), named in its errors as given.

A hybrid passes ``live.failOnDataLoss`` to its Kafka stage as ``failOnDataLoss``;
the Kafka source's errors name the option it knows. :class:`PrefixedOptions`
names them as the user gave them: an
:class:`~sources.errors.InvalidOptionError` gets the prefix on its ``option``
field (and its valid options), from which its message is made again; in the
prose of any :class:`~sources.errors.SplitSourceError` (a problem, a data-loss
message's fix), the options it mentions get it as the patterns below find them. Driver and
executor: the hybrid's enumerator and its split reader each wrap their calls
into a stage.

A message names an option, and gets the prefix, where the name stands as a word
(not after a dot or inside a longer name) and either has a capital or a dot
(``failOnDataLoss``, ``kafka.bootstrap.servers``), or, for a name in lower case
only, stands in quotes or before ``=`` (``'path'``, ``subscribe=``), so that the
word *path* in a sentence stays as it is. A name ending in a dot (an option
family such as ``kafka.``) names every option it begins.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from sources.errors import InvalidOptionError, SplitSourceError

__all__ = ["PrefixedOptions"]


@dataclass(frozen=True)
class PrefixedOptions:
    """The options ``names`` of a source, given by the user under ``prefix``.

    Examples
    --------
    >>> live = PrefixedOptions("live.", ("failOnDataLoss", "kafka.", "subscribe"))
    >>> live.named("Set failOnDataLoss=false, check kafka.bootstrap.servers")
    'Set live.failOnDataLoss=false, check live.kafka.bootstrap.servers'
    >>> live.named("subscribe to 'subscribe' of splitsource.kafka")
    "subscribe to 'live.subscribe' of splitsource.kafka"
    """

    prefix: str
    names: tuple[str, ...]
    _pattern: re.Pattern[str] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Longest first: a family ("kafka.") must not cut a longer name short.
        ordered = sorted(self.names, key=len, reverse=True)
        mentions = "|".join(_mention(name) for name in ordered)
        object.__setattr__(self, "_pattern", re.compile(mentions) if mentions else None)

    def named(self, message: str) -> str:
        """``message`` with every option of ``names`` it mentions under the prefix."""
        if self._pattern is None:
            return message
        return self._pattern.sub(lambda found: self.prefix + found.group(0), message)

    @contextmanager
    def naming_errors(self) -> Iterator[None]:
        """Rewrite the message of a ``SplitSourceError`` raised inside (:meth:`named`), once.

        The error is re-raised as it was, of its own type and with its traceback; an
        error already named by an inner stage keeps its names.
        """
        try:
            yield
        except InvalidOptionError as error:
            if error.options_prefix is None:
                InvalidOptionError.__init__(
                    error,
                    error.source,
                    self.prefix + error.option,
                    self.named(error.problem),
                    [self.prefix + name for name in error.valid],
                )
                error.options_prefix = self.prefix
            raise
        except SplitSourceError as error:
            if error.options_prefix is None and error.args and isinstance(error.args[0], str):
                error.args = (self.named(error.args[0]), *error.args[1:])
                error.options_prefix = self.prefix
            raise

    @classmethod
    def of(cls, prefix: str, names: Iterable[str]) -> PrefixedOptions:
        """The options ``names`` under ``prefix``, each once, in a stable order."""
        return cls(prefix, tuple(sorted(set(names))))


def _mention(name: str) -> str:
    """A pattern that finds ``name`` where a message names the option (module docstring)."""
    escaped = re.escape(name)
    if name.endswith("."):
        return rf"(?<![\w.]){escaped}(?=[\w*])"
    if name != name.lower() or "." in name:
        return rf"(?<![\w.]){escaped}(?!\w|\.\w)"
    return rf"(?<=['`]){escaped}(?=['`])|(?<![\w.]){escaped}(?==)"
