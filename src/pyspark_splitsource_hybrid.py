"""``splitsource.hybrid`` (an archive in files, then Kafka) without a ``register`` call.

Like ``pyspark_splitsource_kafka``, it imports without confluent-kafka and then fails
at ``load()`` saying what to install.
"""

from pyspark_splitsource_kafka import kafka_default_source

DefaultSource = kafka_default_source(
    "splitsource.hybrid", "sources.hybrid_kafka", "ArchiveThenKafkaSource"
)
