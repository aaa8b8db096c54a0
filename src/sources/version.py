"""splitsource's version, written only here: ``pyproject.toml`` and messages read it."""

VERSION = "0.2.0"
