"""A test kit for connector authors.

- :func:`read_all` reads a source as a bounded ``spark.read`` would, without Spark;
- :func:`parse_ddl` turns a DDL schema into a ``StructType`` without Spark;
- :mod:`sources.testing.conformance`: ``SourceConformanceSuite``, with a
  ``ConformanceContext``, runs the cases of ``Case`` against a source (it needs pytest
  and hypothesis, so it is a module of its own, not imported here);
- :mod:`sources.testing.plugin`, a pytest plugin installed with the package, gives
  the ``splitsource_spark`` and ``splitsource_cluster_spark`` fixtures.
"""

from sources.ddl import parse_ddl
from sources.testing.reading import read_all

__all__ = ["parse_ddl", "read_all"]
