"""Sources and readers used only by tests; importable by Spark's Python workers via PYTHONPATH."""
