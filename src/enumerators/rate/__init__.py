"""The rate connector's enumerator."""
