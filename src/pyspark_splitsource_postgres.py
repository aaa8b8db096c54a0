"""``splitsource.postgres`` without a ``register`` call: PySpark registers the ``DefaultSource``
of every installed top-level module named ``pyspark_*`` when a session first needs a
Python data source.

psycopg and the ADBC driver are optional dependencies: without them this module still
imports, and the format fails at ``load()`` saying what to install
(:mod:`sources.spark.extras`).
"""

from sources.spark.extras import default_source

DefaultSource = default_source(
    "splitsource.postgres",
    "sources.postgres.source",
    "PostgresSource",
    {"psycopg", "adbc_driver_postgresql", "adbc_driver_manager"},
    "postgres",
)
