"""Sources, readers and servers (a Kafka broker) used only by tests and benchmarks.

Importable by Spark's Python workers via PYTHONPATH, and by benchmarks that put
``tests/`` on ``sys.path``.
"""
