"""``splitsource.sqlite`` without a ``register`` call: PySpark registers the ``DefaultSource`` of
every installed top-level module named ``pyspark_*`` when a session first needs a Python data
source."""

from sources.spark import data_source_for
from sources.sqlite.source import SqliteTableSource

DefaultSource = data_source_for(SqliteTableSource)
