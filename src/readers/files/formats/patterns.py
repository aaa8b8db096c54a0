"""Spark's datetime patterns (``yyyy-MM-dd HH:mm:ss``) as the strptime formats Arrow parses."""

from __future__ import annotations

import re

__all__ = ["strptime_format"]

_FIELDS = {
    "yyyy": "%Y",
    "uuuu": "%Y",
    "yy": "%y",
    "MM": "%m",
    "MMM": "%b",
    "MMMM": "%B",
    "dd": "%d",
    "HH": "%H",
    "hh": "%I",
    "mm": "%M",
    "ss": "%S",
    "a": "%p",
    "EEE": "%a",
    "EEEE": "%A",
    "XXX": "%z",
    "Z": "%z",
}
_TOKEN = re.compile(r"'[^']*'|([a-zA-Z])\1*|.", re.DOTALL)


def strptime_format(pattern: str) -> str:
    """The strptime format of Spark datetime ``pattern``.

    Fields: ``yyyy``/``uuuu``, ``yy``, ``MM``/``MMM``/``MMMM``, ``dd``, ``HH``,
    ``hh``, ``mm``, ``ss``, ``a``, ``EEE``/``EEEE``, ``XXX``/``Z``; text in single
    quotes and other characters are literal.

    Raises
    ------
    ValueError
        for a field this reader cannot parse, naming it.
    """
    parts = []
    for match in _TOKEN.finditer(pattern):
        token = match.group(0)
        if token.startswith("'"):
            parts.append(token[1:-1].replace("%", "%%") or "'")
        elif match.group(1):
            if token not in _FIELDS:
                raise ValueError(
                    f"the field '{token}' of pattern '{pattern}' is not supported (supported: "
                    f"{', '.join(_FIELDS)}); read the column as a string and convert it with "
                    "pyspark.sql.functions.to_timestamp"
                )
            parts.append(_FIELDS[token])
        else:
            parts.append(token.replace("%", "%%"))
    return "".join(parts)
