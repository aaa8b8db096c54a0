"""The Postgres connector's readers: chunks, the change log, their values."""
