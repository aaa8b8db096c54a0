"""``splitsource.hybrid`` (an archive in files, then Kafka) without a ``register`` call.

Like ``pyspark_splitsource_kafka``, it imports without confluent-kafka and then fails
at ``load()`` saying what to install.
"""

from sources.spark.extras import default_source

DefaultSource = default_source(
    "splitsource.hybrid",
    "sources.hybrid.archive_then_kafka",
    "ArchiveThenKafkaSource",
    {"confluent_kafka"},
    "kafka",
)
