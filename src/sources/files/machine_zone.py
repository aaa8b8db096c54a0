"""The zone Spark reads local times in when neither ``timeZone`` nor the session says one.

Spark's ``spark.sql.session.timeZone`` defaults to the driver JVM's zone, which a
Python data source cannot ask for; :func:`machine_time_zone` finds it as the JVM
does, from the driver machine's configuration. Driver side: the file source calls it
while reading its options, and the zone travels with the plan to the executors.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from readers.files.formats.zones import UTC, parse_zone_id

__all__ = ["machine_time_zone"]

_ZONEINFO = "zoneinfo/"
_POSIX = "posix/"


def machine_time_zone(etc: Path = Path("/etc")) -> str:
    """This machine's zone, as :func:`~readers.files.formats.zones.parse_zone_id` gives it.

    The ``TZ`` environment variable (a leading ``:`` dropped, a path below a
    ``zoneinfo`` directory taken as the zone it names); else the zone the link
    ``etc/localtime`` points to; else the first line of ``etc/timezone``; else UTC.
    A name Spark does not know stands for the machine's current offset, as in the JVM.
    """
    name = _configured_zone(etc)
    try:
        return parse_zone_id(name)
    except ValueError:
        return _current_offset()


def _configured_zone(etc: Path) -> str:
    configured = os.environ.get("TZ", "").removeprefix(":")
    if configured:
        return _zone_name(configured)
    try:
        target = os.readlink(etc / "localtime")
    except OSError:
        target = ""
    if _ZONEINFO in target:
        return _zone_name(target)
    try:
        lines = (etc / "timezone").read_text().splitlines()
    except (OSError, UnicodeDecodeError):
        lines = []
    return lines[0].strip() if lines and lines[0].strip() else UTC


def _zone_name(text: str) -> str:
    """The zone that ``text`` names: itself, or the part of a zoneinfo path after it."""
    name = text.partition(_ZONEINFO)[2] if _ZONEINFO in text else text
    return name.removeprefix(_POSIX)


def _current_offset() -> str:
    seconds = time.localtime().tm_gmtoff
    sign = "-" if seconds < 0 else "+"
    minutes = abs(seconds) // 60
    return parse_zone_id(f"{sign}{minutes // 60:02d}:{minutes % 60:02d}")
