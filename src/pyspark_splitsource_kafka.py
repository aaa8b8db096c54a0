"""``splitsource.kafka`` without a ``register`` call: PySpark registers the ``DefaultSource``
of every installed top-level module named ``pyspark_*`` when a session first needs a
Python data source.

confluent-kafka is an optional dependency: without it this module still imports, and the
format fails at ``load()`` saying what to install (:mod:`sources.spark.extras`).
"""

from sources.spark.extras import default_source

DefaultSource = default_source(
    "splitsource.kafka", "sources.kafka.source", "KafkaSource", {"confluent_kafka"}, "kafka"
)
