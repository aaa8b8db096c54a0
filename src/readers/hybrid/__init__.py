"""The hybrid sources' reader, on executors."""
