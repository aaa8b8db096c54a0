"""The numbers connector's reader."""
