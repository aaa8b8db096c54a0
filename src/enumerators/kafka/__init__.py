"""The Kafka connector's enumerator: partitions, offsets, its state."""
