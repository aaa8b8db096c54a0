"""The rate connector's reader."""
