"""``splitsource.numbers`` without a ``register`` call: PySpark registers the ``DefaultSource``
of every installed top-level module named ``pyspark_*`` when a session first needs a
Python data source."""

from sources.numbers.source import NumberSequenceSource
from sources.spark import data_source_for

DefaultSource = data_source_for(NumberSequenceSource)
