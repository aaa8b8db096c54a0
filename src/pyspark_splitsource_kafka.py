"""``splitsource.kafka`` without a ``register`` call: PySpark registers the ``DefaultSource``
of every installed top-level module named ``pyspark_*`` when a session first needs a
Python data source.

confluent-kafka is an optional dependency. Without it this module must still import:
PySpark imports every ``pyspark_*`` module in one pass, and one that fails breaks the
lookup of all of them. The format then fails at ``load()`` saying what to install.
"""

from pyspark.sql.datasource import DataSource

from sources.spark import data_source_for

_FORMAT = "splitsource.kafka"


class _NeedsConfluentKafka(DataSource):
    """Stands in for the Kafka source while confluent-kafka is not installed."""

    @classmethod
    def name(cls) -> str:
        return _FORMAT

    def __init__(self, options: dict[str, str]) -> None:
        raise ImportError(
            f"{_FORMAT} needs the confluent-kafka package in the Python that runs Spark's "
            "Python workers; install it with: pip install 'splitsource[kafka]'"
        )


DefaultSource: type[DataSource]
try:
    from sources.kafka import KafkaSource
except ModuleNotFoundError as missing:
    if missing.name != "confluent_kafka":
        raise
    DefaultSource = _NeedsConfluentKafka
else:
    DefaultSource = data_source_for(KafkaSource)
