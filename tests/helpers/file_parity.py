"""Reading the same files with splitsource.files and with Spark's own readers, and comparing."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, DataFrameReader, SparkSession


def files(
    spark: SparkSession, fmt: str, path: Path | str, schema: str | None = None, **options: Any
) -> DataFrame:
    """``splitsource.files`` reading ``path`` in format ``fmt`` with ``options``."""
    reader = spark.read.format("splitsource.files").option("format", fmt)
    return _load(reader, path, schema, options)


def sparks(
    spark: SparkSession, fmt: str, path: Path | str, schema: str | None = None, **options: Any
) -> DataFrame:
    """Spark's own reader of ``fmt`` reading ``path`` with ``options``."""
    return _load(spark.read.format(fmt), path, schema, options)


def _load(
    reader: DataFrameReader, path: Path | str, schema: str | None, options: dict[str, Any]
) -> DataFrame:
    if schema is not None:
        reader = reader.schema(schema)
    return reader.options(**options).load(str(path))


def same_rows(ours: DataFrame, theirs: DataFrame) -> None:
    """The same rows, as multisets."""
    assert ours.count() == theirs.count()
    assert ours.exceptAll(theirs).count() == 0
    assert theirs.exceptAll(ours).count() == 0


def same_as_spark(spark: SparkSession, fmt: str, path: Path | str, **options: Any) -> None:
    """Ours and Spark's reader give the same schema and the same rows, in the same order."""
    ours, theirs = files(spark, fmt, path, **options), sparks(spark, fmt, path, **options)
    schemas = ours.schema.simpleString(), theirs.schema.simpleString()
    assert schemas[0] == schemas[1], f"ours {schemas[0]}, Spark's {schemas[1]}"
    rows = _rows(ours), _rows(theirs)
    assert rows[0] == rows[1], f"ours {rows[0]}, Spark's {rows[1]}"


def _rows(df: DataFrame) -> list[tuple[Any, ...]]:
    return sorted((tuple(map(_comparable, row)) for row in df.collect()), key=repr)


def _comparable(value: Any) -> Any:
    """``value``, but NaN as a string: NaN is not equal to itself."""
    return "NaN" if isinstance(value, float) and math.isnan(value) else value


def same_text_as_spark(spark: SparkSession, fmt: str, path: Path | str, **options: Any) -> None:
    """Ours and Spark's reader give the same rows as Spark renders them in the session time
    zone (``cast(... as string)``): a timestamp read as another type, or as another instant,
    shows."""
    ours, theirs = files(spark, fmt, path, **options), sparks(spark, fmt, path, **options)
    assert text_rows(ours) == text_rows(theirs)


def text_rows(df: DataFrame) -> list[tuple[str | None, ...]]:
    """The rows of ``df``, each column cast to a string by Spark, sorted."""
    rendered = df.select([df[name].cast("string") for name in df.columns])
    return sorted((tuple(row) for row in rendered.collect()), key=repr)
