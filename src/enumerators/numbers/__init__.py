"""The numbers connector's enumerator."""
