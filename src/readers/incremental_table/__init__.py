"""The incremental tables' reader."""
