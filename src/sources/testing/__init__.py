"""A test kit for connector authors.

- :func:`read_all` reads a source as a bounded ``spark.read`` would, without Spark;
- :func:`parse_ddl` turns a DDL schema into a ``StructType`` without Spark.
"""

from sources.testing.ddl import parse_ddl
from sources.testing.reading import read_all

__all__ = ["parse_ddl", "read_all"]
