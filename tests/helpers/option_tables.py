"""The option tables of the docs, generated from the options' declarations.

Each table stands in its page between ``<!-- options:NAME -->`` and
``<!-- /options:NAME -->``; :func:`render` makes it from the declared options (their
names, defaults and :class:`~sources.options.Listing`), and ``tests/test_docs.py``
fails when a page's table differs. Regenerate the tables with::

    PYTHONPATH=src:tests python -m helpers.option_tables
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from sources.files.source import FileSource
from sources.framework_options import READ_OPTIONS, STREAM_OPTIONS
from sources.hybrid.archive_then_kafka import ArchiveThenKafkaSource
from sources.kafka.source import KafkaSource
from sources.options import Listing, Option
from sources.postgres.changes import PostgresChangesSource
from sources.postgres.source import PostgresSource

DOCS = Path(__file__).parent.parent.parent / "docs"
REGENERATE = "PYTHONPATH=src:tests python -m helpers.option_tables"


@dataclass(frozen=True)
class Table:
    """One generated table: where it stands, the options it lists and how a row reads."""

    name: str
    page: str
    options: tuple[Option, ...]
    header: tuple[str, ...]
    cells: Callable[[Option, str], tuple[str, ...]]
    """The cells of an option's row, given its name cell."""
    aliases: Mapping[str, str]
    """Other names of options: alias → option name."""


def shown_default(option: Option) -> str:
    """The default of ``option`` as a table shows it."""
    if option.listing is not None and option.listing.shown is not None:
        return option.listing.shown
    if option.required:
        return "required"
    if option.default is None:
        return "not set"
    if isinstance(option.default, bool):
        return f"`{str(option.default).lower()}`"
    if option.default == "":
        return "empty"
    return f"`{option.default}`"


def _file_cells(option: Option, name: str) -> tuple[str, ...]:
    listing = _listing(option)
    return (name, listing.formats, listing.spark, shown_default(option), listing.notes)


def _spark_cells(option: Option, name: str) -> tuple[str, ...]:
    listing = _listing(option)
    return (name, shown_default(option), listing.spark, listing.notes)


def _meaning_cells(option: Option, name: str) -> tuple[str, ...]:
    return (name, shown_default(option), _listing(option).notes)


def _listing(option: Option) -> Listing:
    if option.listing is None:
        raise ValueError(f"option {option.name} has no listing: give it one with .listed(...)")
    return option.listing


TABLES = (
    Table(
        "files",
        "files-options.md",
        FileSource.options,
        ("option", "formats", "Spark's default", "ours", "status"),
        _file_cells,
        FileSource.option_aliases,
    ),
    Table(
        "kafka",
        "kafka.md",
        tuple(o for o in (*KafkaSource.options, KafkaSource.proportional_record_limit) if o),
        ("option", "default", "Spark's default", "notes"),
        _spark_cells,
        KafkaSource.option_aliases,
    ),
    Table(
        "hybrid",
        "hybrid.md",
        tuple(ArchiveThenKafkaSource.options),
        ("option", "default", "meaning"),
        _meaning_cells,
        {},
    ),
    Table(
        "postgres",
        "postgres.md",
        tuple(PostgresSource.options),
        ("option", "default", "meaning"),
        _meaning_cells,
        {},
    ),
    Table(
        "postgres_changes",
        "postgres.md",
        tuple(
            option
            for option in PostgresChangesSource.options
            if option.name not in {o.name for o in PostgresSource.options}
        ),
        ("option", "default", "meaning"),
        _meaning_cells,
        {},
    ),
    Table(
        "read",
        "options.md",
        READ_OPTIONS,
        ("option", "default", "meaning"),
        _meaning_cells,
        {},
    ),
    Table(
        "stream",
        "options.md",
        STREAM_OPTIONS,
        ("option", "default", "meaning"),
        _meaning_cells,
        {},
    ),
)
"""Every generated table."""


def render(table: Table) -> str:
    """The markdown of ``table``: a header, then a row per option in declaration order; a
    family of options such as ``kafka.*`` is named by its prefix and a star."""
    lines = ["| " + " | ".join(table.header) + " |", "|" + "---|" * len(table.header)]
    for option in table.options:
        names = [f"`{option.name}{'*' if option.is_prefix else ''}`"] + [
            f"(`{alias}`)" for alias, name in table.aliases.items() if name == option.name
        ]
        cells = table.cells(option, " ".join(names))
        lines.append("|" + "|".join(f" {cell} " if cell else " " for cell in cells) + "|")
    return "\n".join(lines) + "\n"


def _table_in(table: Table, text: str) -> re.Match[str]:
    """Where ``table`` stands in ``text``, its page; raises if the markers are missing."""
    pattern = rf"<!-- options:{table.name} -->\n(.*?)<!-- /options:{table.name} -->"
    match = re.search(pattern, text, re.DOTALL)
    if match is None:
        raise ValueError(f"{table.page} has no <!-- options:{table.name} --> markers")
    return match


def in_page(table: Table) -> str:
    """The text between the markers of ``table`` in its page."""
    return _table_in(table, (DOCS / table.page).read_text()).group(1)


def write(tables: Iterable[Table] = TABLES) -> None:
    """Rewrite each table in its page."""
    for table in tables:
        page = DOCS / table.page
        text = page.read_text()
        match = _table_in(table, text)
        page.write_text(text[: match.start(1)] + render(table) + text[match.end(1) :])


if __name__ == "__main__":
    write()
