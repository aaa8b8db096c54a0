"""The files connector's reader and its file formats, on executors."""
