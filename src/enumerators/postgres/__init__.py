"""The Postgres connector's enumerators: snapshot chunks and the change stream."""
