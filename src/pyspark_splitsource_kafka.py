"""``splitsource.kafka`` without a ``register`` call: PySpark registers the ``DefaultSource``
of every installed top-level module named ``pyspark_*`` when a session first needs a
Python data source.

confluent-kafka is an optional dependency. Without it this module must still import:
PySpark imports every ``pyspark_*`` module in one pass, and one that fails breaks the
lookup of all of them. The format then fails at ``load()`` saying what to install.
"""

import importlib

from pyspark.sql.datasource import DataSource

from sources.spark import data_source_for


def needs_confluent_kafka(format_name: str) -> type[DataSource]:
    """A data source named ``format_name`` that fails at ``load()`` asking for confluent-kafka;
    it stands in for a source that reads Kafka while the package is not installed."""

    class _NeedsConfluentKafka(DataSource):
        @classmethod
        def name(cls) -> str:
            return format_name

        def __init__(self, options: dict[str, str]) -> None:
            raise ImportError(
                f"{format_name} needs the confluent-kafka package in the Python that runs "
                "Spark's Python workers; install it with: pip install 'splitsource[kafka]'"
            )

    return _NeedsConfluentKafka


def kafka_default_source(format_name: str, module: str, class_name: str) -> type[DataSource]:
    """The data source of the source ``module.class_name``, which reads Kafka, or one that
    asks for confluent-kafka while it is not installed."""
    try:
        source_class = getattr(importlib.import_module(module), class_name)
    except ModuleNotFoundError as missing:
        if missing.name != "confluent_kafka":
            raise
        return needs_confluent_kafka(format_name)
    return data_source_for(source_class)


DefaultSource = kafka_default_source("splitsource.kafka", "sources.kafka", "KafkaSource")
