"""The incremental tables' enumerator."""
