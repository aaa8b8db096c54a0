"""Spark DDL schemas (``"id bigint, tags array<string>"``) parsed without a Spark session.

PySpark parses DDL in the JVM; the test kit reads sources in plain Python, and a
hybrid reads a stage's schema before any session exists, so they parse the common
forms here: comma-separated ``name type [NOT NULL] [COMMENT 'text']`` fields,
Spark's primitive type names, ``decimal(p, s)``, ``array<...>``, ``map<...,...>``
and ``struct<name: type, ...>``. Anything else is refused with a message that asks
for a ``StructType`` instead.
"""

from __future__ import annotations

import re
from typing import NoReturn

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

__all__ = ["parse_ddl"]

_PRIMITIVES: dict[str, DataType] = {
    "boolean": BooleanType(),
    "tinyint": ByteType(),
    "byte": ByteType(),
    "smallint": ShortType(),
    "short": ShortType(),
    "int": IntegerType(),
    "integer": IntegerType(),
    "bigint": LongType(),
    "long": LongType(),
    "float": FloatType(),
    "real": FloatType(),
    "double": DoubleType(),
    "string": StringType(),
    "binary": BinaryType(),
    "date": DateType(),
    "timestamp": TimestampType(),
    "timestamp_ltz": TimestampType(),
    "timestamp_ntz": TimestampNTZType(),
}
_TOKEN = re.compile(r"\s*(`[^`]*`|'(?:[^'\\]|\\.)*'|[A-Za-z_][A-Za-z0-9_]*|\d+|[<>(),:])")


def parse_ddl(ddl: str) -> StructType:
    """The ``StructType`` that ``ddl`` describes, as ``spark.read.schema(ddl)`` would read it.

    Raises
    ------
    ValueError
        For a form this parser does not know; the message asks for a ``StructType``.

    Examples
    --------
    >>> parse_ddl("id BIGINT NOT NULL, tags array<string>").simpleString()
    'struct<id:bigint,tags:array<string>>'
    >>> parse_ddl("id BIGINT NOT NULL").fields[0].nullable
    False
    >>> parse_ddl("id BIGINT COMMENT 'primary key'").fields[0].metadata
    {'comment': 'primary key'}
    """
    parser = _Parser(ddl)
    struct = parser.fields(end=None)
    parser.expect(None)
    return struct


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: list[str] = []
        position = 0
        while text[position:].strip():
            match = _TOKEN.match(text, position)
            if match is None:
                self.fail(f"unexpected '{text[position:].strip()[:10]}'")
            self.tokens.append(match.group(1))
            position = match.end()
        self.index = 0

    def peek(self) -> str | None:
        return self.tokens[self.index] if self.index < len(self.tokens) else None

    def take(self) -> str:
        token = self.peek()
        if token is None:
            self.fail("it ends too early")
        self.index += 1
        return token

    def expect(self, token: str | None) -> None:
        """Take ``token`` (any case), or check that the text ended if it is None."""
        found = self.peek()
        if found is None and token is None:
            return
        if found is None or token is None or found.lower() != token.lower():
            self.fail(f"expected {token or 'the end'}, found {found or 'the end'}")
        self.index += 1

    def fields(self, end: str | None) -> StructType:
        fields = []
        while True:
            name = self.take().strip("`")
            if self.peek() == ":":
                self.take()
            data_type = self.data_type()
            nullable = True
            if (self.peek() or "").lower() == "not":
                self.take()
                self.expect("null")
                nullable = False
            metadata = {}
            if (self.peek() or "").lower() == "comment":
                self.take()
                metadata["comment"] = self.string()
            fields.append(StructField(name, data_type, nullable, metadata))
            if self.peek() != ",":
                break
            self.take()
        if self.peek() != end:
            self.expect(end)
        return StructType(fields)

    def string(self) -> str:
        """A quoted string, its backslash escapes undone."""
        token = self.take()
        if not token.startswith("'"):
            self.fail(f"expected a quoted string, found {token}")
        return re.sub(r"\\(.)", r"\1", token[1:-1])

    def data_type(self) -> DataType:
        name = self.take().lower()
        if name in _PRIMITIVES:
            return _PRIMITIVES[name]
        if name in ("decimal", "dec", "numeric"):
            if self.peek() != "(":
                return DecimalType(10, 0)
            self.take()
            precision = int(self.take())
            scale = 0
            if self.peek() == ",":
                self.take()
                scale = int(self.take())
            self.expect(")")
            return DecimalType(precision, scale)
        if name == "array":
            self.expect("<")
            element = self.data_type()
            self.expect(">")
            return ArrayType(element)
        if name == "map":
            self.expect("<")
            key = self.data_type()
            self.expect(",")
            value = self.data_type()
            self.expect(">")
            return MapType(key, value)
        if name == "struct":
            self.expect("<")
            struct = self.fields(end=">")
            self.expect(">")
            return struct
        self.fail(f"unknown type '{name}'")

    def fail(self, problem: str) -> NoReturn:
        raise ValueError(
            f"Cannot parse the schema '{self.text}' without Spark: {problem}. "
            "Give a pyspark.sql.types.StructType instead."
        )
