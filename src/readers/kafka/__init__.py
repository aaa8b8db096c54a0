"""The Kafka connector's reader and its consumers, on executors."""
