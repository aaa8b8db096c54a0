"""splitsource.files against Spark's own readers: the same files and options, the same rows.

Each case writes its files, reads them with ``spark.read.format("splitsource.files")``
and with ``spark.read.csv/json/text/parquet``, and compares the schemas and the rows.
"""

from __future__ import annotations

import gzip
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers.file_parity import files, same_as_spark, same_text_as_spark, sparks, text_rows
from sources.files.source import FileSource
from sources.spark import register

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Row, SparkSession

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module", autouse=True)
def registered(spark: SparkSession) -> None:
    register(spark, FileSource)


CSV_CASES: dict[str, tuple[bytes, dict[str, Any]]] = {
    "header, every column a string": (b"year,name\n2024,ann\n2025,bob\n", {"header": "true"}),
    "no header": (b"1,a\n2,b\n", {}),
    "an empty last value after a quoted one, no line break at the end": (
        b'a,b\n"",',
        {"header": "true", "emptyValue": "E"},
    ),
    "infer types": (
        b"i,f,b,d,s\n1,1.5,true,2020-01-02,x\n",
        {"header": "true", "inferSchema": "true"},
    ),
    "infer a long": (b"i\n1\n9999999999\n", {"header": "true", "inferSchema": "true"}),
    "ragged rows": (b"a,b,c\n1,2\n3,4,5,6\n7,8,9\n", {"header": "true"}),
    "ragged rows inferred": (
        b"a,b,c\n1,2\n3,4,5,6\n7,8,9\n",
        {"header": "true", "inferSchema": "true"},
    ),
    "one line, no newline": (b"a,b,c", {"header": "true", "inferSchema": "true"}),
    "one record, no newline": (b"1,x", {"inferSchema": "true"}),
    "byte order mark": ("\ufeffa,b\n1,2\n".encode(), {"header": "true"}),
    "crlf": (b"a,b\r\n1,2\r\n3,\r\n", {"header": "true"}),
    "comments": (b"#c\na,b\n1,2\n#x,y\n3,4\n", {"header": "true", "comment": "#"}),
    "empty lines before the header": (b"\n\n  \na,b\n1,2\n\n \n3,4\n", {"header": "true"}),
    "quoted empties": (b'a,b\n1,""\n2,\n"",x\n', {"header": "true"}),
    "quoted empties inferred": (b'a,b\n1,""\n"",2\n', {"header": "true", "inferSchema": "true"}),
    "nullValue": (b'a,b\n1,NA\n2,"NA"\nNA,""\n', {"header": "true", "nullValue": "NA"}),
    "emptyValue": (b'a,b\n1,""\n2,\n', {"header": "true", "emptyValue": "EMPTY"}),
    "delimiter": (b"a;b\n1;2\n", {"header": "true", "delimiter": ";"}),
    "tab separator": (b"a\tb\n1\t2\n", {"header": "true", "sep": "\\t"}),
    "white space kept": (b"a,b\n 1 , x \n", {"header": "true"}),
    "white space trimmed": (
        b"a,b\n 1 , x \n",
        {
            "header": "true",
            "inferSchema": "true",
            "ignoreLeadingWhiteSpace": "true",
            "ignoreTrailingWhiteSpace": "true",
        },
    ),
    "multiLine": (b'a,b\n1,"x\ny"\n2,z\n', {"header": "true", "multiLine": "true"}),
    "multiLine, CRLF": (
        b'a,b\r\n1,"x\r\ny"\r\n2,"p\nq\rr"\r\n',
        {"header": "true", "multiLine": "true"},
    ),
    "doubled quotes with escape set to the quote": (
        b'a\n"q""q"\n',
        {"header": "true", "escape": '"'},
    ),
    "duplicate header names": (b"a,A,b,\n1,2,3,4\n", {"header": "true"}),
    "quotes and braces inside unquoted values": (
        b'{"key":86,"value":"val_86"}\n{"key":27,"value":"val_27"}\n{"key":1}\n',
        {},
    ),
    "quotes and braces inside unquoted values, one line without a line break": (
        b'{"key":86,"value":"val_86"}',
        {},
    ),
    "enforceSchema=false with the schema inferred from the header": (
        b"a,b\n1,2\n",
        {"header": "true", "enforceSchema": "false", "inferSchema": "true"},
    ),
    "empty file": (b"", {}),
    "option names in any case": (b"A,B\n1,2\n", {"HEADER": "true", "inferschema": "true"}),
    "whole numbers wider than a long infer as decimals": (
        b"d,l,x,w\n1,1,0.1,1.\n1,9223372036854775807,1.0,2147483648\n"
        b"92233720368547758070,1,92233720368547758070,123456789012345678901234\n",
        {"header": "true", "inferSchema": "true"},
    ),
    "numbers Java's Double.parseDouble reads infer as doubles": (
        b"a,b,c\n1.5,NaN,1\n1d,Infinity,+2\n2F,-Inf, 3\n0x1p3,+1.5,\n",
        {"header": "true", "inferSchema": "true"},
    ),
    "NaN and infinities Java does not read infer as strings": (
        b"a,b,c\n1.5,1.5,1.5\nNAN,inf,INF\n",
        {"header": "true", "inferSchema": "true"},
    ),
    "nanValue, positiveInf and negativeInf infer as doubles": (
        b"a\n1.5\nNA\nPOS\nNEG\n",
        {
            "header": "true",
            "inferSchema": "true",
            "nanValue": "NA",
            "positiveInf": "POS",
            "negativeInf": "NEG",
        },
    ),
    "booleans in any case, whole numbers with a plus sign": (
        b"b,i\nTrUe,+5\nfalse,-3\n",
        {"header": "true", "inferSchema": "true"},
    ),
    "timestamps of timestampFormat infer as timestamps": (
        b"t\n26/08/2015 18:00\n27/10/2014 18:30\n",
        {"header": "true", "inferSchema": "true", "timestampFormat": "dd/MM/yyyy HH:mm"},
    ),
    "dates of dateFormat infer as dates": (
        b"d\n26/08/2015\n27/10/2014\n",
        {"header": "true", "inferSchema": "true", "dateFormat": "dd/MM/yyyy"},
    ),
    "timestamps with and without offsets and dates infer as timestamps": (
        b"t,u\n2015-08-26 10:00:00,2015-08-26\n2015-08-26T10:00:00Z,2015-08-26 10:00:00\n"
        b"2015-08-26T10:00:00+01:00,2015-08-27\n",
        {"header": "true", "inferSchema": "true"},
    ),
    "preferDate=false: dates infer as timestamps": (
        b"a,b,c\n2024-01-05,2024-01-05 10:00:00,1\n2024-02-05,2024-02-05,2024-02-05\n",
        {"header": "true", "inferSchema": "true", "preferDate": "false"},
    ),
    "preferDate=false: dates of dateFormat infer as strings": (
        b"d\n26/08/2015\n27/10/2014\n",
        {
            "header": "true",
            "inferSchema": "true",
            "dateFormat": "dd/MM/yyyy",
            "preferDate": "FALSE",
        },
    ),
    "preferDate=false: dates beside a timestampFormat infer as strings": (
        b"d,t\n2015-08-26,26/08/2015 18:00\n",
        {
            "header": "true",
            "inferSchema": "true",
            "timestampFormat": "dd/MM/yyyy HH:mm",
            "preferDate": "false",
        },
    ),
    "dates beside timestamps of a timestampFormat infer as strings": (
        b"t\n2015-08-26\n26/08/2015 18:00\n",
        {"header": "true", "inferSchema": "true", "timestampFormat": "dd/MM/yyyy HH:mm"},
    ),
    "invalid dates and timestamps infer as strings": (
        b"d,t\n2015-02-30,2015-08-26 24:00:00\n",
        {"header": "true", "inferSchema": "true"},
    ),
    "a quoted value followed by text reads to the separator as written": (
        b'"a"b,ccc,ddd\nab,cc"c,ddd"\n"a,b"c,""d,"e"\n',
        {},
    ),
    "white space after a closing quote is dropped": (b'"a" ,"b"\t\n" c " ,d\n', {}),
    "lineSep of one character": (
        b"a,b;1,2;3,x;;5,6;",
        {"header": "true", "inferSchema": "true", "lineSep": ";"},
    ),
    "lineSep and comments": (b"a,b|#c|1,2|#|3,4|", {"lineSep": "|", "comment": "#"}),
    "lineSep of one character of several bytes": (
        "a,b\u20ac1,2\u20ac".encode(),
        {"lineSep": "\u20ac"},
    ),
    "records as wide as maxColumns": (
        b"a,b\n1,2\n3,4,5\n6,7,8,9\n",
        {"header": "true", "maxColumns": "4"},
    ),
    "records as wide as maxColumns, malformed ones dropped": (
        b"a,b\n1,2\n3,4,5\n6,7,8,9\n",
        {"header": "true", "maxColumns": "4", "mode": "DROPMALFORMED"},
    ),
    "a quote after leading white space opens a quoted value": (
        b"year|comment\n2012| 'No comment'\n2015| 'a|b'\n",
        {"header": "true", "sep": "|", "quote": "'", "ignoreLeadingWhiteSpace": "true"},
    ),
}

JAVA_NUMBERS = (
    b"1,1.5,2.5,true\n+5,NaN,Inf,TrUe\n6,NAN,inf,false\n7,1d,2F,FALSE\n"
    b"8,-Infinity,+Infinity,true\n9,0x1p3, 1.5 ,true\n10,-Inf,nan,true\n11,INF,-INF,true\n"
)
"""Numbers Java's parsers read (``+5``, ``1d``, ``0x1p3``) and do not (``NAN``, ``inf``)."""

CSV_SCHEMA_CASES: dict[str, tuple[bytes, str, dict[str, Any]]] = {
    "grouping separators": (
        b'x\n"80,000.65"\n35000\n"1,2,3"\n',
        "x decimal(12,2)",
        {"header": "true"},
    ),
    "permissive with the corrupt record column": (
        b"a,b\n1,x\nbad,y\n3\n4,z,extra\n",
        "a int, b string, _corrupt_record string",
        {"header": "true"},
    ),
    "permissive without it": (b"1,x\nbad,y\n3\n", "a int, b string", {}),
    "dropmalformed": (b"1,x\nbad,y\n3\n", "a int, b string", {"mode": "DROPMALFORMED"}),
    "timestampFormat": (
        b"t,d\n01/02/2024 10:11:12,01/02/2024\n",
        "t timestamp, d date",
        {"header": "true", "timestampFormat": "dd/MM/yyyy HH:mm:ss", "dateFormat": "dd/MM/yyyy"},
    ),
    "typed columns by position (enforceSchema)": (
        b"x,y\n1,2\n",
        "b bigint, a bigint",
        {"header": "true", "enforceSchema": "true"},
    ),
    "numbers as Java reads them; NAN, inf, INF malformed": (
        JAVA_NUMBERS,
        "i int, d double, f float, b boolean, _corrupt_record string",
        {},
    ),
    "numbers as Java reads them, malformed ones dropped": (
        JAVA_NUMBERS,
        "i int, d double, f float, b boolean",
        {"mode": "DROPMALFORMED"},
    ),
    "nanValue, positiveInf and negativeInf": (
        JAVA_NUMBERS,
        "i int, d double, f float, b boolean",
        {"nanValue": "NAN", "positiveInf": "INF", "negativeInf": "-INF"},
    ),
    "whole numbers wider than a long into a decimal": (
        b"92233720368547758070\n-1.\n+5\n",
        "d decimal(20,0)",
        {},
    ),
    "lineSep, malformed records kept": (
        b"a,b|1,x|2|3,4,5|bad,y|",
        "a int, b string, _corrupt_record string",
        {"lineSep": "|", "header": "true"},
    ),
    "lineSep, malformed records dropped": (
        b"a,b|1,x|2|3,4,5|bad,y|",
        "a int, b string",
        {"lineSep": "|", "header": "true", "mode": "DROPMALFORMED"},
    ),
    "decimals with more digits than the scale round half up": (
        b'price\n80000.65\n"80,000.65"\n12.5\n-0.5\n1.5e3\n1.55e-1\n.5\n',
        "price decimal(10,0)",
        {"header": "true"},
    ),
    "decimals too wide once rounded are malformed": (
        b"price\n80000.65\n99.95\n12.45\n-0.05\n",
        "price decimal(3,1), _corrupt_record string",
        {"header": "true"},
    ),
    "quotes and braces inside unquoted values, malformed records kept": (
        b'{"key":86,"value":"val_86"}\n{"key":1}\n{"a":[1,2],"b":"c"}\n',
        "key string, value string, _corrupt_record string",
        {},
    ),
    "enforceSchema=false, a header naming the schema in another case": (
        b"a,B\n1,2\n",
        "A int, b int, _corrupt_record string",
        {"header": "true", "enforceSchema": "false"},
    ),
    "enforceSchema=false, multiLine": (
        b'a,b\n1,"x\ny"\n',
        "a int, b string",
        {"header": "true", "enforceSchema": "false", "multiLine": "true"},
    ),
    "decimals too wide once rounded are dropped": (
        b"price\n80000.65\n99.95\n12.45\n-0.05\n",
        "price decimal(3,1)",
        {"header": "true", "mode": "DROPMALFORMED"},
    ),
}


@pytest.mark.parametrize("case", list(CSV_CASES))
def test_csv_reads_like_spark(spark: SparkSession, tmp_path: Path, case: str) -> None:
    data, options = CSV_CASES[case]
    (tmp_path / "data.csv").write_bytes(data)
    same_as_spark(spark, "csv", tmp_path / "data.csv", **options)


@pytest.mark.parametrize("case", list(CSV_SCHEMA_CASES))
def test_csv_with_a_schema_reads_like_spark(spark: SparkSession, tmp_path: Path, case: str) -> None:
    data, schema, options = CSV_SCHEMA_CASES[case]
    (tmp_path / "data.csv").write_bytes(data)
    same_as_spark(spark, "csv", tmp_path / "data.csv", schema=schema, **options)


JSON_CASES: dict[str, tuple[bytes, str | None, dict[str, Any]]] = {
    "inferred": (b'{"b": 1, "a": {"y": "s", "x": 1.5}}\n\n{"c": [1, 2]}\n', None, {}),
    "numbers into strings": (
        b'{"a": 1, "b": 1.50, "c": true, "d": {"x":1}}\n{"a": "s", "b": 1e3}\n',
        "a string, b string, c string, d string",
        {},
    ),
    "primitivesAsString": (
        b'{"a": 1, "b": 1.5, "c": true, "d": "x"}\n',
        None,
        {"primitivesAsString": "true"},
    ),
    "multiLine array": (b'[\n {"a": 1},\n {"a": 2, "b": "x"}\n]\n', None, {"multiLine": "true"}),
    "multiLine object": (b'{\n "a": 1,\n "b": [1, 2]\n}\n', None, {"multiLine": "true"}),
    "malformed lines, permissive": (
        b'{"a": 1}\n{"a": \n{"a": "x"}\n',
        "a bigint, _corrupt_record string",
        {},
    ),
    "malformed lines, inferred": (b'{"a": 1}\n{"a": \n{"a": 3}\n', None, {}),
    "timestampFormat": (
        b'{"t": "01/02/2024 10:11:12"}\n',
        "t timestamp",
        {"timestampFormat": "dd/MM/yyyy HH:mm:ss"},
    ),
    "crlf": (b'{"a": 1}\r\n{"a": 2}\r\n', None, {"lineSep": "\n"}),
    "a field of several types": (b'{"a": 1}\n{"a": "x"}\n{"a": 1.5}\n', None, {}),
    "multiLine, the first document only": (b'{"a": 1}\n{"a": 2}\n', None, {"multiLine": "true"}),
    "whole numbers wider than a long": (
        b'{"id": 98765432109876543210, "n": 1, "big": ' + b"7" * 40 + b"}\n"
        b'{"id": 5, "n": 12345678901234567890123, "big": 2}\n'
        b'{"id": 1.5, "n": 2}\n',
        None,
        {},
    ),
    "clashing types inside arrays and structs": (
        b'{"s": {"f": 1}, "l": [1, "x", {"k": 2}], "m": [[1, 2], ["y"]]}\n'
        b'{"s": {"f": [1]}, "l": [], "m": [[true]], "o": 3}\n'
        b'{"s": "text", "o": {"p": null}}\n',
        None,
        {},
    ),
    "lines that are arrays of objects": (
        b'[{"a": "x"}]\n[{"a": "y"}, {"b": 2}]\n{"a": "z"}\n[]\n  [{"b": 3}]\n[1, 2]\n',
        None,
        {},
    ),
    "dropFieldIfAllNull": (
        b'{"a": null, "b": 1, "c": [], "d": {"x": null}, "e": ""}\n{"a": null, "f": {"y": 2}}\n',
        None,
        {"dropFieldIfAllNull": "true"},
    ),
    "decimals with more digits than the scale round half up": (
        b'{"price": 80000.65}\n{"price": "80000.65"}\n{"price": 12.5}\n{"price": -0.5}\n'
        b'{"price": 1e3}\n{"price": 0.30000000000000004}\n{"price": 2}\n',
        "price decimal(10,0)",
        {},
    ),
    "decimals too wide once rounded are malformed": (
        b'{"price": 80000.65}\n{"price": 99.95}\n{"price": 12.45}\n{"price": -0.05}\n',
        "price decimal(3,1), _corrupt_record string",
        {},
    ),
    "decimals too wide once rounded are dropped": (
        b'{"price": 80000.65}\n{"price": 99.95}\n{"price": 12.45}\n{"price": -0.05}\n',
        "price decimal(3,1)",
        {"mode": "DROPMALFORMED"},
    ),
    "lineSep: records end at it only": (
        b'{"a":1}\n|{"a":2}\r|| {"a":3} |{"a":\n4}',
        "a bigint, _corrupt_record string",
        {"lineSep": "|"},
    ),
    "lineSep: inferred, malformed records": (
        b'{"a":1}|{"a":|{"a":"x\ny"}|{"a":3}\n|',
        None,
        {"lineSep": "|"},
    ),
    "lineSep of several bytes": (
        '{"a":1}\u20ac{"a":2}\r\n\u20ac\u20ac{"a":3}'.encode(),
        None,
        {"lineSep": "\u20ac"},
    ),
    "whole numbers into timestamps are seconds": (
        b'{"t": 1700000000}\n{"t": "2026-01-01T00:00:00Z"}\n{"t": -5}\n{"t": 0}\n',
        "t timestamp",
        {},
    ),
    "map columns": (
        b'{"m": {"a": 1, "b": null}}\n{"m": {}}\n{"m": null}\n{"x": 1}\n{"m": {"c": 3}}\n',
        "m map<string,int>",
        {},
    ),
    # A first line of null crashed pyarrow's reader, and so the Python worker.
    "lines of null, inferred": (b'null\n{"a": "x"}\n  null\n{"a": "y"}\n', None, {}),
    "lines of null only, inferred": (b"null\n", None, {}),
    "lines of null are malformed records": (
        b'null\n{"a": "x"}\nnull\n',
        "a string, _corrupt_record string",
        {},
    ),
    "lines of null are dropped by DROPMALFORMED": (
        b'null\n{"a": "x"}\nnull\n',
        "a string",
        {"mode": "DROPMALFORMED"},
    ),
    # pyarrow reads a later line of null as a row of nulls, and fails on a later true.
    "later lines of words are malformed records": (
        b'{"a": "x"}\nnull\n{"a": "y"}\ntrue\n  null\n{}\n{"a": null}\n',
        "a string, _corrupt_record string",
        {},
    ),
    "later lines of words are dropped by DROPMALFORMED": (
        b'{"a": "x"}\nnull\n{}\nfalse\n',
        "a string",
        {"mode": "DROPMALFORMED"},
    ),
}


@pytest.mark.parametrize("case", list(JSON_CASES))
def test_json_reads_like_spark(spark: SparkSession, tmp_path: Path, case: str) -> None:
    data, schema, options = JSON_CASES[case]
    (tmp_path / "data.json").write_bytes(data)
    same_as_spark(spark, "json", tmp_path / "data.json", schema=schema, **options)


# Local times in New York's zone: an ordinary one, one that clocks skip (2024-03-10 02:30)
# and one they pass twice (2024-11-03 01:30), beside text with offsets, which keeps them.
LOCAL_TIMES = ["2024-01-05 10:00:00", "2024-03-10 02:30:00", "2024-11-03 01:30:00"]
WITH_OFFSETS = ["2024-01-05T10:00:00+01:00", "2024-01-05T10:00:00Z", "2024-07-01T00:00:00-04:00"]
BOTH = list(zip(LOCAL_TIMES, WITH_OFFSETS, strict=True))
ZONED_CASES: dict[str, tuple[str, bytes, str | None, dict[str, str]]] = {
    "csv, a schema": (
        "csv",
        "\n".join(["t,u", *map(",".join, BOTH), "2024-07-01,"]).encode(),
        "t timestamp, u timestamp",
        {"header": "true"},
    ),
    "csv, inferred": (
        "csv",
        "\n".join(["t", *LOCAL_TIMES]).encode(),
        None,
        {"header": "true", "inferSchema": "true"},
    ),
    "csv, timestampFormat": (
        "csv",
        b"t\n05/01/2024 10:00\n10/03/2024 02:30\n03/11/2024 01:30\n",
        "t timestamp",
        {"header": "true", "timestampFormat": "dd/MM/yyyy HH:mm"},
    ),
    "json, a schema": (
        "json",
        "\n".join(json.dumps({"t": t, "u": u}) for t, u in BOTH).encode(),
        "t timestamp, u timestamp",
        {},
    ),
    "json, timestampFormat with an offset": (
        "json",
        b'{"t": "2024-01-05 10:00+0100"}\n{"t": "2024-03-10 02:30-0500"}\n',
        "t timestamp",
        {"timestampFormat": "yyyy-MM-dd HH:mmZ"},
    ),
}


@pytest.mark.parametrize("zone", ["America/New_York", "+05:30"])
@pytest.mark.parametrize("case", list(ZONED_CASES))
def test_timestamps_read_in_the_timezone_option_like_spark(
    spark: SparkSession, tmp_path: Path, case: str, zone: str
) -> None:
    fmt, data, schema, options = ZONED_CASES[case]
    (tmp_path / f"data.{fmt}").write_bytes(data)
    same_as_spark(spark, fmt, tmp_path, schema=schema, timeZone=zone, **options)


def test_the_timezone_option_reads_like_sparks_session_timezone(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A session with another zone than the machine's reads like ours given that zone."""
    fmt, data, schema, options = ZONED_CASES["csv, a schema"]
    (tmp_path / "data.csv").write_bytes(data)
    ours = files(spark, fmt, tmp_path, schema=schema, timeZone="America/New_York", **options)
    session_zone = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    try:
        theirs = sparks(spark, fmt, tmp_path, schema=schema, **options).collect()
    finally:
        spark.conf.set("spark.sql.session.timeZone", session_zone)
    assert sorted(ours.collect()) == sorted(theirs)


WRONG_TYPES_INSIDE: dict[str, tuple[bytes, str]] = {
    "a struct keeps the fields that fit": (
        b'{"a": 0, "s": {"x": 0, "y": "fine", "n": {"p": 1, "q": 2}}}\n'
        b'{"a": 1, "s": {"x": "bad", "y": "ok"}}\n'
        b'{"a": 2, "s": {"x": 1.5, "y": 7, "n": {"p": "bad", "q": 1}}}\n'
        b'{"a": "bad", "s": {"x": "bad"}}\n'
        b'{"a": 4, "s": 5}\n',
        "a bigint, s struct<x: bigint, y: string, n: struct<p: bigint, q: bigint>>",
    ),
    "an array keeps its structs, and is null with another element that does not fit": (
        b'{"a": 0, "l": [{"x": 1}], "n": [1], "ll": [[{"x": 2}]], "nn": [[3]]}\n'
        b'{"a": 1, "l": [{"x": 1}, {"x": "bad", "y": "k"}]}\n'
        b'{"a": 2, "l": [{"x": 1}, 7]}\n'
        b'{"a": 3, "n": [1, "bad", 3], "b": "after"}\n'
        b'{"a": 4, "ll": [[{"x": "bad"}], [{"x": 2}]], "nn": [[1], 2]}\n',
        "a bigint, b string, l array<struct<x: bigint, y: string>>, n array<bigint>, "
        "ll array<array<struct<x: bigint>>>, nn array<array<bigint>>",
    ),
    "a line that is an array gives every object, each keeping what fits": (
        b'[{"a": 0}, {"a": 1, "s": {"x": 1}}]\n'
        b'[{"a": 2}, {"a": 3, "s": {"x": "bad", "y": "ok"}}]\n'
        b'[{"a": 4}, 5]\n',
        "a bigint, s struct<x: bigint, y: string>",
    ),
    "a map keeps its structs, and is null with another value that does not fit": (
        b'{"a": 0, "m": {"k": 1}, "ms": {"k": {"x": 1}}}\n'
        b'{"a": 1, "ms": {"k": {"x": "bad"}, "j": {"x": 2}}}\n'
        b'{"a": 2, "m": {"k": 1, "j": "bad"}}\n',
        "a bigint, m map<string, bigint>, ms map<string, struct<x: bigint>>",
    ),
}


@pytest.mark.parametrize("mode", ["PERMISSIVE", "DROPMALFORMED"])
@pytest.mark.parametrize("corrupt", ["", ", _corrupt_record string"], ids=["plain", "corrupt"])
@pytest.mark.parametrize("case", list(WRONG_TYPES_INSIDE))
def test_json_values_of_the_wrong_type_inside_read_like_spark(
    spark: SparkSession, tmp_path: Path, case: str, corrupt: str, mode: str
) -> None:
    data, schema = WRONG_TYPES_INSIDE[case]
    (tmp_path / "data.json").write_bytes(data)
    same_as_spark(spark, "json", tmp_path / "data.json", schema=schema + corrupt, mode=mode)


def test_json_failfast_fails_on_a_value_of_the_wrong_type_inside_a_struct_like_spark(
    spark: SparkSession, tmp_path: Path
) -> None:
    (tmp_path / "data.json").write_bytes(b'{"s": {"x": 1}}\n{"s": {"x": "bad"}}\n')
    options = {"schema": "s struct<x: bigint>", "mode": "FAILFAST"}
    with pytest.raises(Exception, match="MALFORMED_RECORD_IN_PARSING"):
        sparks(spark, "json", tmp_path, **options).collect()
    with pytest.raises(Exception, match=r"data\.json' at line 2"):
        files(spark, "json", tmp_path, **options).collect()


@pytest.mark.parametrize("schema", [None, "a string, b string, _corrupt_record string"])
@pytest.mark.parametrize("mode", ["PERMISSIVE", "DROPMALFORMED"])
def test_csv_record_wider_than_max_columns_fails_in_every_mode_like_spark(
    spark: SparkSession, tmp_path: Path, mode: str, schema: str | None
) -> None:
    (tmp_path / "data.csv").write_bytes(b"a,b\n1,2\n3,4,5\n6,7,8,9\n")
    options = {"schema": schema, "header": "true", "maxColumns": "3", "mode": mode}
    with pytest.raises(Exception, match="TextParsingException"):
        sparks(spark, "csv", tmp_path, **options).collect()
    with pytest.raises(Exception, match=r"data\.csv' at line 4: .*maxColumns \(3\).*raise"):
        files(spark, "csv", tmp_path, **options).collect()


MULTILINE_CSV: dict[str, tuple[bytes, dict[str, str]]] = {
    "too few and too many values, a bad number, quoted line breaks": (
        b'a,b\n1,"x\ny"\n2\n3,z,extra\nbad,w\n4,"p\nq"\n5,"m\nn",6\nbad,"r\ns"\n',
        {"header": "true"},
    ),
    "a line of white space is a record": (b'a,b\n1,"x\ny"\n  \n2,z\n', {"header": "true"}),
    "escaped quotes": (b'a,b\n1,"q\\"x\ny"\n2\n3,"\\\\"\n', {"header": "true", "escape": "\\"}),
    "comments": (b'#c\n1,"x\n#y"\n#z\n2\n3,w\n', {"comment": "#"}),
    # Spark's parser takes the file's first line break for its line separator, and reads
    # that separator inside quoted values as \n.
    "a CRLF file: a quoted CRLF reads as LF, a lone CR or LF as written": (
        b'a,b\r\n1,"x\r\ny"\r\n2,"p\nq\rr"\r\n3,"s\r\nt",extra\r\nbad,"u\r\nv"\r\n',
        {"header": "true"},
    ),
    "an LF file: a quoted CRLF as written": (
        b'a,b\n1,"x\r\ny"\n2,"p\r\nq",extra\nbad,"r\r\ns"\n',
        {"header": "true"},
    ),
    "the first line break, inside quotes, decides": (b'1,"x\r\ny"\n2,"p\r\nq"\nbad,"r\r\ns"\n', {}),
    "a lone CR first: a quoted CR reads as LF": (b'1,"x\ry"\n2,"p\r\nq"\n', {}),
}


@pytest.mark.parametrize("mode", ["PERMISSIVE", "DROPMALFORMED"])
@pytest.mark.parametrize("schema", ["a int, b string", "a int, b string, _corrupt_record string"])
@pytest.mark.parametrize("case", list(MULTILINE_CSV))
def test_multiline_csv_malformed_records_read_like_spark(
    spark: SparkSession, tmp_path: Path, case: str, schema: str, mode: str
) -> None:
    data, options = MULTILINE_CSV[case]
    (tmp_path / "data.csv").write_bytes(data)
    same_as_spark(
        spark, "csv", tmp_path / "data.csv", schema=schema, multiLine="true", mode=mode, **options
    )


def test_multiline_csv_failfast_names_the_file_and_record(
    spark: SparkSession, tmp_path: Path
) -> None:
    (tmp_path / "data.csv").write_bytes(b'a,b\n1,"x\ny"\n2,"p\nq",extra\n3,z\n')
    options = {"header": "true", "multiLine": "true", "mode": "FAILFAST"}
    with pytest.raises(Exception, match=r"data\.csv' at line 4 .*Expected 2 columns"):
        files(spark, "csv", tmp_path, schema="a int, b string", **options).collect()


MULTILINE_JSON = {
    "a.json": b'[\n {"a": 1, "b": "x"},\n {"a": 2}\n]\n',
    "b.json": b'{\n "a": 3,\n "b": \n',  # cut short
    "c.json": b'{"a": 4,\n "b": "y"}',
    "d.json": b'[{"a": 5}, {"a": "six", "b": "z"}]',  # a value of the wrong type
    "e.json": b'[{"a": 7}, 8]',  # an element that is not an object
    "f.json": b'[{"a": 9, "s": {"x": "bad", "y": "w"}}, {"a": 10}]',  # inside a struct
}


@pytest.mark.parametrize("mode", ["PERMISSIVE", "DROPMALFORMED"])
@pytest.mark.parametrize(
    "schema",
    [
        "a bigint, b string, s struct<x: bigint, y: string>",
        "a bigint, b string, s struct<x: bigint, y: string>, _corrupt_record string",
    ],
)
def test_multiline_json_malformed_files_read_like_spark(
    spark: SparkSession, tmp_path: Path, schema: str, mode: str
) -> None:
    for name, data in MULTILINE_JSON.items():
        (tmp_path / name).write_bytes(data)
    same_as_spark(spark, "json", tmp_path, schema=schema, multiLine="true", mode=mode)


@pytest.mark.parametrize("mode", ["PERMISSIVE", "DROPMALFORMED"])
def test_multiline_json_schema_inferred_past_a_malformed_file_like_spark(
    spark: SparkSession, tmp_path: Path, mode: str
) -> None:
    """Inference reads the first file in path order: here the malformed one, which gives
    Spark's corrupt-record column (PERMISSIVE) and no fields; the next file gives them."""
    for order, name in enumerate(("b.json", "a.json", "c.json")):
        (tmp_path / f"{order}.json").write_bytes(MULTILINE_JSON[name])
    same_as_spark(spark, "json", tmp_path, multiLine="true", mode=mode)


@pytest.mark.parametrize(("fmt", "data"), [("csv", b"x,y\n1,2\n"), ("json", b'{"x": 1}\n')])
def test_schema_inferred_past_an_empty_first_file_like_spark(
    spark: SparkSession, tmp_path: Path, fmt: str, data: bytes
) -> None:
    (tmp_path / f"a.{fmt}").write_bytes(b"")
    (tmp_path / f"b.{fmt}").write_bytes(data)
    same_as_spark(spark, fmt, tmp_path, header="true")


@pytest.mark.parametrize("schema", [None, "a bigint, b string"])
def test_multiline_json_failfast_names_the_malformed_file(
    spark: SparkSession, tmp_path: Path, schema: str | None
) -> None:
    for name in ("a.json", "b.json", "c.json"):
        (tmp_path / name).write_bytes(MULTILINE_JSON[name])
    options = {"multiLine": "true", "mode": "FAILFAST"}
    with pytest.raises(Exception, match=r"b\.json"):
        files(spark, "json", tmp_path, schema=schema, **options).collect()


@pytest.mark.parametrize(
    "options", [{}, {"wholetext": "true"}, {"lineSep": "\n"}], ids=["lines", "wholetext", "lineSep"]
)
def test_text_reads_like_spark(
    spark: SparkSession, tmp_path: Path, options: dict[str, str]
) -> None:
    (tmp_path / "a.txt").write_bytes(b"one\r\ntwo\n\nthree")
    (tmp_path / "b.txt").write_bytes(b"x\n")
    same_as_spark(spark, "text", tmp_path, **options)


@pytest.mark.parametrize("line_sep", [",", "\r\n", "\r", "\u20ac", "b,"])
def test_text_with_a_line_sep_reads_like_spark(
    spark: SparkSession, tmp_path: Path, line_sep: str
) -> None:
    (tmp_path / "a.txt").write_bytes("a,b,,c\r\nd,\u20ace\r\n\r\n\u20ac,".encode())
    (tmp_path / "b.txt").write_bytes(b"x\n")
    same_as_spark(spark, "text", tmp_path, lineSep=line_sep)


def test_parquet_merge_schema_reads_like_spark(spark: SparkSession, tmp_path: Path) -> None:
    pq.write_table(pa.table({"a": [1, 2]}), tmp_path / "1.parquet")
    pq.write_table(pa.table({"a": [3], "b": ["x"]}), tmp_path / "2.parquet")
    same_as_spark(spark, "parquet", tmp_path, mergeSchema="true")


def test_glob_filter_with_braces_reads_like_spark(spark: SparkSession, tmp_path: Path) -> None:
    for name in ("a.json", "b.tsv", "c.json"):
        (tmp_path / name).write_text(json.dumps({"name": name}) + "\n")
    same_as_spark(spark, "json", tmp_path, pathGlobFilter="{a.json,b.tsv}")


def test_nested_directories_and_brace_globs_read_like_spark(
    spark: SparkSession, tmp_path: Path
) -> None:
    for part in ("x", "y", "z"):
        (tmp_path / part / "deep").mkdir(parents=True)
        (tmp_path / part / "deep" / "f.csv").write_text(f"p\n{part}\n")
    same_as_spark(spark, "csv", f"{tmp_path}/{{x,y}}/*/*.csv", header="true")
    same_as_spark(spark, "csv", tmp_path, header="true", recursiveFileLookup="true")


TREES: dict[str, tuple[dict[str, str], str, dict[str, str]]] = {
    # name: (files below the table, the path read below it, options; ROOT is the table)
    "a subdirectory that is not a partition": (
        {"a.csv": "id\n1\n2\n", "sub/b.csv": "id\n3\n4\n"},
        "",
        {},
    ),
    "the same, recursiveFileLookup": (
        {"a.csv": "id\n1\n2\n", "sub/b.csv": "id\n3\n4\n"},
        "",
        {"recursiveFileLookup": "true"},
    ),
    "files at mixed depths": (
        {"a.csv": "id\n1\n", "x/b.csv": "id\n2\n", "x/y/c.csv": "id\n3\n"},
        "",
        {},
    ),
    "hidden names, and a partition starting with _": (
        {
            "a.csv": "id\n1\n",
            "_tmp/b.csv": "id\n2\n",
            ".cache/c.csv": "id\n3\n",
            "_k=1/d.csv": "id\n4\n",
            "_k=1/_SUCCESS": "",
            "_k=1/e.csv._COPYING_": "id\n5\n",
        },
        "",
        {},
    ),
    "a stray directory inside a partition": (
        {"k=1/x.csv": "id\n1\n", "k=1/sub/y.csv": "id\n2\n", "k=2/z.csv": "id\n3\n"},
        "",
        {},
    ),
    "a file beside the partitions": (
        {"k=1/x.csv": "id\n1\n", "a.csv": "id\n7\n"},
        "",
        {},
    ),
    "partitions below a directory that is not one": (
        {"o/k=1/x.csv": "id\n1\n", "o/k=2/y.csv": "id\n2\n"},
        "",
        {},
    ),
    "a partition directory read with basePath": (
        {"k=1/x.csv": "id\n1\n", "k=1/sub/y.csv": "id\n2\n", "k=2/z.csv": "id\n3\n"},
        "k=1",
        {"basePath": "ROOT"},
    ),
    "a partition directory read without basePath": (
        {"k=1/x.csv": "id\n1\n", "k=1/sub/y.csv": "id\n2\n"},
        "k=1",
        {},
    ),
    "a glob of directories": (
        {"a/x.csv": "id\n1\n", "a/s/y.csv": "id\n2\n", "b/z.csv": "id\n3\n"},
        "*",
        {},
    ),
    "a glob filter that matches only below": (
        {"a.json": "{}\n", "sub/b.csv": "id\n2\n", "k=1/c.txt": "id\n3\n"},
        "",
        {"pathGlobFilter": "*.csv", "recursiveFileLookup": "true"},
    ),
}


def _tree(root: Path, tree: dict[str, str]) -> None:
    for name, text in tree.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


@pytest.mark.parametrize("case", list(TREES))
def test_directory_trees_read_like_spark(spark: SparkSession, tmp_path: Path, case: str) -> None:
    tree, below, options = TREES[case]
    _tree(tmp_path, tree)
    options = {name: value.replace("ROOT", str(tmp_path)) for name, value in options.items()}
    same_as_spark(spark, "csv", tmp_path / below, header="true", **options)


@pytest.mark.parametrize(
    "case",
    [
        "a subdirectory that is not a partition",
        "hidden names, and a partition starting with _",
        "a stray directory inside a partition",
        "a file beside the partitions",
    ],
)
def test_a_file_stream_reads_the_files_of_a_batch_read_like_sparks_file_stream(
    spark: SparkSession, tmp_path: Path, case: str
) -> None:
    tree, _, _ = TREES[case]
    table = tmp_path / "table"
    _tree(table, tree)
    batch = files(spark, "csv", table, header="true")
    ours = (
        spark.readStream.format("splitsource.files")
        .option("format", "csv")
        .option("stateLocation", str(tmp_path / "state"))
    )
    theirs = spark.readStream.format("csv")
    streamed = [
        _available_now(reader.option("header", "true").schema(batch.schema).load(str(table)))
        for reader in (ours, theirs)
    ]
    assert streamed[0] == streamed[1] == sorted(batch.collect())


def _available_now(df: DataFrame) -> list[Row]:
    """Every row a stream of ``df`` reads with ``trigger(availableNow=True)``, sorted."""
    name = f"stream_{uuid.uuid4().hex}"
    df.writeStream.format("memory").queryName(name).trigger(
        availableNow=True
    ).start().awaitTermination(120)
    return sorted(df.sparkSession.table(name).collect())


CONFLICTING_TREES: dict[str, tuple[dict[str, str], str, list[str]]] = {
    # name: (files, Spark's error class, the directories our error names)
    "a directory beside the partitions": (
        {"k=1/x.csv": "id\n1\n", "other/z.csv": "id\n3\n"},
        "CONFLICTING_DIRECTORY_STRUCTURES",
        ["k=1", "other"],
    ),
    "partitions at two depths": (
        {"k=1/x.csv": "id\n1\n", "o/k=2/y.csv": "id\n2\n"},
        "CONFLICTING_DIRECTORY_STRUCTURES",
        ["k=1", "o/k=2"],
    ),
    "different column names": (
        {"k=1/x.csv": "id\n1\n", "j=2/y.csv": "id\n2\n"},
        "CONFLICTING_PARTITION_COLUMN_NAMES",
        ["j=2", "k=1"],
    ),
    "files in a partition and in its sub-partition": (
        {"k=1/x.csv": "id\n1\n", "k=1/j=2/y.csv": "id\n2\n"},
        "CONFLICTING_PARTITION_COLUMN_NAMES",
        ["k=1", "k=1/j=2"],
    ),
    "an empty partition value": (
        {"k=/x.csv": "id\n1\n"},
        "EMPTY_PARTITION_COLUMN_VALUE",
        ["k="],
    ),
}


@pytest.mark.parametrize("case", list(CONFLICTING_TREES))
def test_conflicting_directory_trees_fail_like_spark_naming_the_directories(
    spark: SparkSession, tmp_path: Path, case: str
) -> None:
    tree, spark_error, named = CONFLICTING_TREES[case]
    _tree(tmp_path, tree)
    with pytest.raises(Exception, match=spark_error):
        sparks(spark, "csv", tmp_path, header="true").collect()
    with pytest.raises(Exception, match="recursiveFileLookup=true") as raised:
        files(spark, "csv", tmp_path, header="true").collect()
    for directory in named:
        assert f"'{tmp_path / directory}'" in str(raised.value)
    same_as_spark(spark, "csv", tmp_path, header="true", recursiveFileLookup="true")


def test_a_file_stream_over_directories_that_are_not_one_table_fails_like_sparks(
    spark: SparkSession, tmp_path: Path
) -> None:
    table = tmp_path / "table"
    _tree(table, {"k=1/x.csv": "id\n1\n", "other/z.csv": "id\n3\n"})
    ours = (
        spark.readStream.format("splitsource.files")
        .option("format", "csv")
        .option("stateLocation", str(tmp_path / "state"))
    )
    for reader, says in [
        (spark.readStream.format("csv"), "CONFLICTING_DIRECTORY_STRUCTURES"),
        (ours, f"Conflicting directory structures.*'{table / 'other'}'"),
    ]:
        with pytest.raises(Exception, match=says):
            _available_now(reader.option("header", "true").schema("id string").load(str(table)))


@pytest.mark.parametrize(
    ("read", "base", "spark_says", "ours_says"),
    [
        ("k=1", "k=1/x.csv", "must be a directory", "is not a directory"),
        ("", "k=1", "Wrong basePath", "does not hold the path"),
    ],
    ids=["a file", "below the path"],
)
def test_a_base_path_that_cannot_be_the_tables_root_fails_like_spark(
    spark: SparkSession, tmp_path: Path, read: str, base: str, spark_says: str, ours_says: str
) -> None:
    _tree(tmp_path, {"k=1/x.csv": "id\n1\n"})
    options = {"header": "true", "basePath": str(tmp_path / base)}
    with pytest.raises(Exception, match=spark_says):
        sparks(spark, "csv", tmp_path / read, **options).collect()
    with pytest.raises(Exception, match=f"Option 'basePath' .*{ours_says}"):
        files(spark, "csv", tmp_path / read, **options).collect()


@pytest.mark.parametrize("schema", [None, "id string"], ids=["inferred", "given"])
def test_a_dataframe_reads_the_files_listed_when_it_was_defined_like_spark(
    spark: SparkSession, tmp_path: Path, schema: str | None
) -> None:
    frames = {}
    for reader, ignore in [(files, "false"), (sparks, "false"), (files, "true"), (sparks, "true")]:
        table = tmp_path / f"{reader.__name__}-{ignore}"
        _tree(table, {"a.csv": "id\n1\n", "b.csv": "id\n2\n"})
        frames[reader, ignore] = reader(
            spark, "csv", table, schema, header="true", ignoreMissingFiles=ignore
        )
        if schema is not None:
            # Given a schema, Spark builds a Python data source at the first action (its
            # own reader lists at load()): after one action both have listed.
            assert frames[reader, ignore].count() == 2
        (table / "a.csv").unlink()
        (table / "c.csv").write_text("id\n3\n")
    for reader in (files, sparks):
        strict = frames[reader, "false"]
        for action in (strict.collect, strict.where("id > '0'").collect):
            with pytest.raises(Exception, match=r"a\.csv") as raised:
                action()
            if reader is files:
                assert "does not exist any more" in str(raised.value)
                assert "ignoreMissingFiles=true skips" in str(raised.value)
        lenient = frames[reader, "true"]
        assert [row.id for row in lenient.collect()] == ["2"]
        assert lenient.where("id > '0'").count() == 1


def test_corrupt_files_among_good_ones_are_skipped_like_spark(
    spark: SparkSession, tmp_path: Path
) -> None:
    (tmp_path / "a.json.gz").write_bytes(gzip.compress(b'{"a": 1}\n')[:12])
    (tmp_path / "b.json.gz").write_bytes(gzip.compress(b'{"a": 2}\n{"a": 3}\n'))
    same_as_spark(spark, "json", tmp_path, ignoreCorruptFiles="true")


def test_the_first_bad_file_in_path_order_is_named(spark: SparkSession, tmp_path: Path) -> None:
    for name in ("c", "a", "b"):
        (tmp_path / f"{name}.json.gz").write_bytes(b"not gzip")
    with pytest.raises(Exception, match=r"a\.json\.gz"):
        files(spark, "json", tmp_path).collect()


@pytest.mark.parametrize(
    ("option", "value", "advice"),
    [
        ("allowComments", "true", "remove the comments"),
        ("locale", "de-DE", "en-US"),
        ("encoding", "latin1", "UTF-8"),
        ("lineSep", "\r\n", "leave it unset"),
        ("timeZone", "Mars/Olympus", "give a region such as America/New_York"),
        ("timestampFormat", "yyyy-MM-dd'T'HH:mm:ss.SSS", "to_timestamp"),
        ("sep", "::", "single character"),
        ("prefersDate", "false", "use that"),
        ("encoding", "no-such-codec", "UTF-8"),
        ("int96RebaseMode", "LEGACY", "rewrite them, or use CORRECTED"),
        ("datetimeRebaseMode", "corrected", "in upper case, as Spark"),
    ],
)
def test_options_that_cannot_be_honoured_fail_at_load_naming_the_option(
    spark: SparkSession, tmp_path: Path, option: str, value: str, advice: str
) -> None:
    (tmp_path / "a.csv").write_text("a\n1\n")
    with pytest.raises(Exception, match=rf"Option '{option}'.*{advice}"):
        files(spark, "csv", tmp_path, **{option: value})


@pytest.mark.parametrize("multi_line", ["false", "true"])
@pytest.mark.parametrize("schema", ["x int, b int", "a int", "a int, b int, c int"])
def test_csv_header_not_naming_the_schema_fails_with_enforce_schema_false_like_spark(
    spark: SparkSession, tmp_path: Path, schema: str, multi_line: str
) -> None:
    (tmp_path / "data.csv").write_bytes(b"a,B\n1,2\n")
    options = {"header": "true", "enforceSchema": "false", "multiLine": multi_line}
    with pytest.raises(Exception, match=r"CSV header does not conform|Number of column in CSV"):
        sparks(spark, "csv", tmp_path, schema, **options).collect()
    with pytest.raises(Exception, match=r"header of CSV file '[^']*data\.csv'.*enforceSchema"):
        files(spark, "csv", tmp_path, schema, **options).collect()


CSV_VALUES = ["", '""', "1", "-20", "1.5", "x", " y ", "true", "NA", '"a,b"', "2020-01-02"]


@st.composite
def csv_files(draw: st.DrawFn) -> tuple[bytes, dict[str, str]]:
    """A CSV file of ragged rows, blank and comment lines, and the options to read it with."""
    sep = draw(st.sampled_from([",", ";"]))
    options = {
        "header": draw(st.sampled_from(["true", "false"])),
        "inferSchema": draw(st.sampled_from(["true", "false"])),
        "sep": sep,
    }
    for name, value in (
        ("nullValue", "NA"),
        ("emptyValue", "E"),
        ("comment", "#"),
        ("ignoreLeadingWhiteSpace", "true"),
        ("ignoreTrailingWhiteSpace", "true"),
    ):
        if draw(st.booleans()):
            options[name] = value
    width = draw(st.integers(1, 3))
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    lines = [sep.join("abc"[:width])] if options["header"] == "true" else []
    for index in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["row", "row", "row", "blank", "comment"])) if index else "row"
        if kind == "blank":
            lines.append(draw(st.sampled_from(["", "  "])))
        elif kind == "comment" and "comment" in options:
            lines.append("#" + sep + "x")
        else:
            cells = draw(st.lists(st.sampled_from(CSV_VALUES), min_size=width, max_size=width))
            lines.append(sep.join(cells).replace(",", sep) if sep != "," else ",".join(cells))
    text = newline.join(lines) + (newline if draw(st.booleans()) else "")
    return text.encode(), options


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(file=csv_files())
def test_generated_csv_reads_like_spark(
    spark: SparkSession,
    tmp_path_factory: pytest.TempPathFactory,
    file: tuple[bytes, dict[str, str]],
) -> None:
    data, options = file
    path = tmp_path_factory.mktemp("csv") / "data.csv"
    path.write_bytes(data)
    same_as_spark(spark, "csv", path, **options)


JSON_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(1 << 40), 1 << 40),
    st.sampled_from([1.5, -0.25, 1e10]),
    st.text("ab é", max_size=4),
    st.lists(st.integers(0, 9), max_size=2),
)


@st.composite
def json_files(draw: st.DrawFn) -> tuple[bytes, str | None, dict[str, str]]:
    """JSON lines (some blank or malformed), a schema or None, and options."""
    # One object with a field first: Spark refuses a query of the corrupt-record column alone.
    lines = [json.dumps({"a": draw(JSON_VALUES)})]
    for _ in range(draw(st.integers(0, 5))):
        kind = draw(st.sampled_from(["object", "object", "object", "blank", "malformed"]))
        if kind == "blank":
            lines.append(draw(st.sampled_from(["", "  "])))
        elif kind == "malformed":
            lines.append('{"a": ')
        else:
            keys = draw(st.lists(st.sampled_from("abc"), unique=True, max_size=3))
            lines.append(json.dumps({key: draw(JSON_VALUES) for key in keys}))
    schema = draw(st.sampled_from([None, "a string, b string, c string, _corrupt_record string"]))
    options = {"primitivesAsString": draw(st.sampled_from(["true", "false"]))}
    if draw(st.booleans()):
        options["mode"] = "DROPMALFORMED"
    return ("\n".join(lines) + "\n").encode(), schema, options


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(file=json_files())
def test_generated_json_lines_read_like_spark(
    spark: SparkSession,
    tmp_path_factory: pytest.TempPathFactory,
    file: tuple[bytes, str | None, dict[str, str]],
) -> None:
    data, schema, options = file
    path = tmp_path_factory.mktemp("json") / "data.json"
    path.write_bytes(data)
    same_as_spark(spark, "json", path, schema=schema, **options)


SPARK_TYPES = (
    "select cast(1 as tinyint) as b, cast(2 as smallint) as s, 3 as i, 4L as l,"
    " cast(1.5 as float) as f, 2.5d as d, cast(1.25 as decimal(5, 2)) as d5,"
    " cast(123.456 as decimal(18, 3)) as d18, cast(1.5 as decimal(38, 10)) as d38,"
    " 'x' as str, true as bool, date'2026-11-27' as day,"
    " timestamp'2026-11-27 18:21:00.123456' as ts,"
    " timestamp_ntz'2026-11-27 18:21:00.123456' as ntz,"
    " timestamp'1850-03-01 12:00:00' as old, cast(null as timestamp) as missing"
)
"""A row of every scalar type Spark writes to every text and columnar format, with a
timestamp before 1900 (where INT96 files of other writers need a rebase mode)."""
SPARK_NESTED = (
    "select *, X'0102' as bin, named_struct('t', ts, 'n', ntz) as st, array(ts, old) as arr,"
    " map('k', ts) as m, array(named_struct('m', map('k', array(ts)))) as deep"
    " from ({scalars})"
)
"""The same, with binary and with timestamps nested in structs, lists and maps."""


@pytest.fixture
def new_york(spark: SparkSession) -> Iterator[SparkSession]:
    """``spark`` with the session time zone America/New_York, which is not the machine's."""
    before = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    try:
        yield spark
    finally:
        spark.conf.set("spark.sql.session.timeZone", before)


@pytest.mark.parametrize("kind", ["INT96", "TIMESTAMP_MICROS", "TIMESTAMP_MILLIS"])
def test_parquet_spark_writes_reads_like_spark(
    new_york: SparkSession, tmp_path: Path, kind: str
) -> None:
    """Every type Spark writes, its timestamps as each ``outputTimestampType``."""
    new_york.conf.set("spark.sql.parquet.outputTimestampType", kind)
    try:
        new_york.sql(SPARK_NESTED.format(scalars=SPARK_TYPES)).write.parquet(str(tmp_path / "t"))
    finally:
        new_york.conf.unset("spark.sql.parquet.outputTimestampType")
    same_as_spark(new_york, "parquet", tmp_path / "t")
    same_text_as_spark(new_york, "parquet", tmp_path / "t")


def test_a_parquet_stream_reads_int96_timestamps_like_sparks_file_stream(
    new_york: SparkSession, tmp_path: Path
) -> None:
    """Spark's default encoding, streamed: ours infers a ``timestamp``, on which a watermark
    can be defined, and reads the rows of Spark's file stream given Spark's schema."""
    new_york.sql(SPARK_NESTED.format(scalars=SPARK_TYPES)).write.parquet(str(tmp_path / "t"))
    batch = sparks(new_york, "parquet", tmp_path / "t")
    ours = (
        new_york.readStream.format("splitsource.files")
        .option("format", "parquet")
        .option("stateLocation", str(tmp_path / "state"))
        .load(str(tmp_path / "t"))
    )
    theirs = new_york.readStream.schema(batch.schema).parquet(str(tmp_path / "t"))
    assert ours.schema.simpleString() == batch.schema.simpleString()
    streamed = [_available_now(df.withWatermark("ts", "1 minute")) for df in (ours, theirs)]
    assert streamed[0] == streamed[1] == sorted(batch.collect())


PYARROW_TIMESTAMPS: dict[str, tuple[pa.DataType, dict[str, Any]]] = {
    "INT96": (pa.timestamp("ns"), {"use_deprecated_int96_timestamps": True}),
    "micros, adjusted to UTC": (pa.timestamp("us", "UTC"), {}),
    "micros, local": (pa.timestamp("us"), {}),
    "millis, adjusted to UTC": (pa.timestamp("ms", "UTC"), {}),
    "millis, local": (pa.timestamp("ms"), {}),
    "millis, legacy converted type": (pa.timestamp("ms", "UTC"), {"version": "1.0"}),
}


@pytest.mark.parametrize("case", list(PYARROW_TIMESTAMPS))
def test_parquet_timestamps_pyarrow_writes_read_like_spark(
    new_york: SparkSession, tmp_path: Path, case: str
) -> None:
    """Each timestamp encoding of pyarrow's writer, alone and in a struct, a list, a map."""
    kind, write_options = PYARROW_TIMESTAMPS[case]
    stamps = pa.array([1_795_821_660_123_000_000, None], pa.timestamp("ns", "UTC")).cast(kind)
    table = pa.table(
        {
            "ts": stamps,
            "st": pa.StructArray.from_arrays([stamps], ["t"]),
            "arr": pa.array([[stamp] for stamp in stamps.to_pylist()], pa.list_(kind)),
            "m": pa.array(
                [[("k", stamp)] for stamp in stamps.to_pylist()], pa.map_(pa.string(), kind)
            ),
        }
    )
    pq.write_table(table, tmp_path / "t.parquet", **write_options)
    same_as_spark(new_york, "parquet", tmp_path)
    same_text_as_spark(new_york, "parquet", tmp_path)


ANCIENT: dict[str, tuple[pa.Array, bool, str]] = {
    # name: (values, written as INT96, the option Spark and ours name)
    "INT96 before 1900": (
        pa.array([None, -3_786_825_600_000_000], pa.timestamp("us", "UTC")),
        True,
        "int96RebaseMode",
    ),
    "INT96 before 1900, in a list": (
        pa.array([[-3_786_825_600_000_000]], pa.list_(pa.timestamp("us", "UTC"))),
        True,
        "int96RebaseMode",
    ),
    "micros before 1900": (
        pa.array([-2_208_988_800_000_001], pa.timestamp("us", "UTC")),
        False,
        "datetimeRebaseMode",
    ),
    "millis before 1900, in a struct": (
        pa.StructArray.from_arrays(
            [pa.array([-3_786_825_600_000], pa.timestamp("ms", "UTC"))], ["t"]
        ),
        False,
        "datetimeRebaseMode",
    ),
    "a date before 1582-10-15": (pa.array([-141_428], pa.date32()), False, "datetimeRebaseMode"),
}
"""Values pyarrow writes that Spark 2 and 3 read differently: Spark 4 reads them as written
(``CORRECTED``, its default), and fails on them with ``EXCEPTION``."""


@pytest.mark.parametrize("case", list(ANCIENT))
def test_parquet_ancient_values_another_writer_wrote_fail_with_exception_like_spark(
    new_york: SparkSession, tmp_path: Path, case: str
) -> None:
    values, int96, option = ANCIENT[case]
    path = tmp_path / "old.parquet"
    pq.write_table(pa.table({"v": values}), path, use_deprecated_int96_timestamps=int96)
    with pytest.raises(Exception, match="READ_ANCIENT_DATETIME"):
        sparks(new_york, "parquet", tmp_path, **{option: "EXCEPTION"}).collect()
    with pytest.raises(Exception, match=f"{option}=CORRECTED") as raised:
        files(new_york, "parquet", tmp_path, **{option: "EXCEPTION"}).collect()
    assert str(path) in str(raised.value)


@pytest.mark.parametrize("case", list(ANCIENT))
def test_parquet_ancient_values_read_as_written_by_default_like_spark(
    new_york: SparkSession, tmp_path: Path, case: str
) -> None:
    values, int96, option = ANCIENT[case]
    pq.write_table(
        pa.table({"v": values}), tmp_path / "old.parquet", use_deprecated_int96_timestamps=int96
    )
    same_as_spark(new_york, "parquet", tmp_path)
    same_text_as_spark(new_york, "parquet", tmp_path, **{option: "CORRECTED"})


def test_parquet_ancient_values_spark_wrote_read_as_written_like_spark(
    new_york: SparkSession, tmp_path: Path
) -> None:
    """Spark 3.1 and later write in the proleptic Gregorian calendar, and say so."""
    new_york.sql(
        "select timestamp'1850-03-01 12:00:00' as ts, date'1500-01-01' as day,"
        " array(timestamp_ntz'1500-01-01 00:00:00') as ntz"
    ).write.parquet(str(tmp_path / "t"))
    same_as_spark(new_york, "parquet", tmp_path / "t")
    same_text_as_spark(new_york, "parquet", tmp_path / "t")


TEXT_WRITTEN = (
    "select cast(1 as tinyint) as b, cast(2 as smallint) as s, 3 as i, 4L as l,"
    " cast(1.5 as float) as f, 2.5d as d, cast(1.25 as decimal(5, 2)) as d5,"
    " cast(123.456 as decimal(18, 3)) as d18, 'x' as str, true as bool,"
    " timestamp'2026-11-27 18:21:00.123456' as ts, timestamp_ntz'2026-11-27 18:21:00.1' as ntz,"
    " cast(null as timestamp) as missing{nested}"
)
"""What Spark writes to CSV (and, with ``nested``, JSON) that ours reads back as Spark does;
:data:`TEXT_CORNERS` holds the rarer values, each a case of its own."""


def _written_text(spark: SparkSession, path: Path, fmt: str, query: str, given: bool) -> None:
    """``query`` written by Spark as ``fmt``, read back by ours and by Spark alike (schema
    inferred, or the writer's), rendered by Spark in the session time zone."""
    written = spark.sql(query)
    written.write.format(fmt).option("header", "true").save(str(path))
    options = {"header": "true", "inferSchema": "true", "timeZone": "America/New_York"}
    schema = written.schema.toDDL().replace(" NOT NULL", "") if given else None
    ours = files(spark, fmt, path, schema, **options)
    theirs = sparks(spark, fmt, path, schema, **options)
    assert ours.schema.simpleString() == theirs.schema.simpleString()
    assert text_rows(ours) == text_rows(theirs)


@pytest.mark.parametrize("fmt", ["json", "csv"])
@pytest.mark.parametrize("given", [False, True], ids=["inferred", "the writer's schema"])
def test_text_formats_spark_writes_read_like_spark(
    new_york: SparkSession, tmp_path: Path, fmt: str, given: bool
) -> None:
    nested = ", date'2026-11-27' as day, named_struct('t', ts, 'n', ntz) as st, array(ts) as arr"
    query = TEXT_WRITTEN.format(nested=nested if fmt == "json" else "")
    _written_text(new_york, tmp_path / "t", fmt, query, given)


TEXT_CORNERS: dict[str, tuple[str, str, bool]] = {
    "json: binary, written as base64": ("json", "select X'0102' as bin", True),
    "json: a map of timestamps, given the writer's schema": (
        "json",
        "select map('k', timestamp'2026-11-27 18:21:00') as m",
        True,
    ),
    "csv: an offset with seconds infers as a timestamp": (
        "csv",
        "select timestamp'1850-03-01 12:00:00' as old",  # New York's LMT: -04:56:02
        False,
    ),
    "json: an offset with seconds": ("json", "select timestamp'1850-03-01 12:00:00' as old", True),
    "json: a map of decimals and a null": (
        "json",
        "select map('a', cast(1.25 as decimal(5, 2)), 'b', null) as m",
        True,
    ),
    "json: binary, empty and null": (
        "json",
        "select X'' as bin union all select cast(null as binary) union all select X'FF00'",
        True,
    ),
}


@pytest.mark.parametrize("case", list(TEXT_CORNERS))
def test_rare_values_spark_writes_as_text_read_like_spark(
    new_york: SparkSession, tmp_path: Path, case: str
) -> None:
    fmt, query, given = TEXT_CORNERS[case]
    _written_text(new_york, tmp_path / "t", fmt, query, given)
