"""The splits of the packaged connectors, each with its serializer: the leaves of a connector.

A connector's enumerator (driver) and reader (executor) both need its split, so
the split lives here, in a module that imports only the author API; neither
role imports the other (the pattern of Flink Kafka's ``split`` package).
"""
