"""Time zones as Spark reads timestamps: its zone ids, and wall-clock times as instants.

:func:`parse_zone_id` accepts what Spark's ``timeZone`` option accepts and gives the
zone as Arrow names it; :func:`as_instants` reads wall-clock timestamps in such a
zone. Both are pure; the driver parses the zone, the executors convert with it.
"""

from __future__ import annotations

import re
from types import MappingProxyType

import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["UTC", "as_instants", "parse_zone_id"]

UTC = "UTC"
"""The zone of an offset of zero, as :func:`parse_zone_id` gives it."""

_SHORT_IDS = MappingProxyType(
    {
        "EST": "-05:00",
        "HST": "-10:00",
        "MST": "-07:00",
        "ACT": "Australia/Darwin",
        "AET": "Australia/Sydney",
        "AGT": "America/Argentina/Buenos_Aires",
        "ART": "Africa/Cairo",
        "AST": "America/Anchorage",
        "BET": "America/Sao_Paulo",
        "BST": "Asia/Dhaka",
        "CAT": "Africa/Harare",
        "CNT": "America/St_Johns",
        "CST": "America/Chicago",
        "CTT": "Asia/Shanghai",
        "EAT": "Africa/Addis_Ababa",
        "ECT": "Europe/Paris",
        "IET": "America/Indiana/Indianapolis",
        "IST": "Asia/Kolkata",
        "JST": "Asia/Tokyo",
        "MIT": "Pacific/Apia",
        "NET": "Asia/Yerevan",
        "NST": "Pacific/Auckland",
        "PLT": "Asia/Karachi",
        "PNT": "America/Phoenix",
        "PRT": "America/Puerto_Rico",
        "PST": "America/Los_Angeles",
        "SST": "Pacific/Guadalcanal",
        "VST": "Asia/Ho_Chi_Minh",
    }
)
"""Java's ``ZoneId.SHORT_IDS``, which Spark resolves three-letter ids with."""

_SINGLE_DIGIT_HOUR = re.compile(r"([+-])(\d):")
_SINGLE_DIGIT_MINUTE = re.compile(r"([+-])(\d\d):(\d)$")
_OFFSET = re.compile(
    r"([+-])(?:(\d{1,2})|(\d\d)(\d\d)|(\d\d):(\d\d)|(\d\d)(\d\d)(\d\d)|(\d\d):(\d\d):(\d\d))"
)
_UTC_REGIONS = frozenset(
    f"{area}{name}"
    for area in ("", "Etc/")
    for name in ("UTC", "UCT", "Universal", "Zulu", "GMT0", "GMT+0", "GMT-0", "Greenwich")
) | {"Etc/GMT"}
"""Region names of UTC itself: read as UTC, which pyarrow's readers apply natively."""

_PREFIXES = ("UTC", "GMT", "UT")
_REGION = re.compile(r"[A-Za-z][A-Za-z0-9~/._+-]+")
_MAX_OFFSET_SECONDS = 18 * 3600
_ADVICE = "give a region such as America/New_York, an offset such as +01:00, or UTC"


def parse_zone_id(text: str) -> str:
    """The zone Spark's ``timeZone`` value ``text`` names, as Arrow names it.

    As Spark's ``DateTimeUtils.getZoneId``: a region (``America/New_York``, case
    as written), one of Java's three-letter ids (``PST``; ``EST`` is ``-05:00``), an
    offset (``Z``, ``+1``, ``-05``, ``+0530``, ``+05:30``, ``+1:00``), or one after
    ``UTC``, ``GMT`` or ``UT`` (``GMT+1``); those three alone are UTC. Offsets come
    back as ``+HH:MM``, an offset of zero as :data:`UTC`.

    Raises
    ------
    ValueError
        for anything else, and for an offset with seconds, which Arrow cannot apply.
    """
    zone = _SHORT_IDS.get(text, text)
    zone = _SINGLE_DIGIT_HOUR.sub(r"\g<1>0\g<2>:", zone, count=1)
    zone = _SINGLE_DIGIT_MINUTE.sub(r"\1\2:0\3", zone, count=1)
    if len(zone) <= 1 or zone[0] in "+-":
        return _offset(zone, text)
    prefix = next((p for p in _PREFIXES if zone.startswith(p)), None)
    if prefix is not None and zone == prefix:
        return UTC
    if prefix is not None and zone[len(prefix)] in "+-":
        return _offset(zone[len(prefix) :], text)
    return UTC if zone in _UTC_REGIONS else _region(zone, text)


def as_instants(local: pa.Array | pa.ChunkedArray, zone: str) -> pa.Array | pa.ChunkedArray:
    """Wall-clock timestamps ``local`` (no zone) read in ``zone``, as UTC instants.

    A time that two instants share (clocks turned back) is the earlier one; a time
    that clocks skipped is moved forward by the length of the skip (02:30 on the
    night clocks go from 02:00 to 03:00 is 03:30). Both are Java's
    ``ZonedDateTime.of``, which Spark reads local times with.
    """
    earliest = pc.assume_timezone(local, zone, ambiguous="earliest", nonexistent="earliest")
    # In a skipped hour "earliest" is the last instant before the skip: its offset is
    # the one before it, which Java applies; elsewhere the difference is zero.
    instants = pc.add(earliest, pc.subtract(local, pc.local_timestamp(earliest)))
    result: pa.Array | pa.ChunkedArray = pc.cast(instants, pa.timestamp(local.type.unit, UTC))
    return result


def _offset(zone: str, text: str) -> str:
    """Java's ``ZoneOffset.of(zone)`` as ``+HH:MM``; ``text`` is what the user gave."""
    if zone == "Z":
        return UTC
    match = _OFFSET.fullmatch(zone)
    if match is None:
        raise ValueError(f"'{text}' is not a time zone Spark accepts; {_ADVICE}")
    digits = [int(group) for group in match.groups()[1:] if group is not None]
    hours, minutes, seconds = (*digits, 0, 0)[:3]
    total = hours * 3600 + minutes * 60 + seconds
    if hours > 18 or minutes > 59 or seconds > 59 or total > _MAX_OFFSET_SECONDS:
        raise ValueError(f"'{text}' is an offset beyond +/-18:00; {_ADVICE}")
    if seconds:
        raise ValueError(f"'{text}' is an offset with seconds, which is not supported; {_ADVICE}")
    if not total:
        return UTC
    return f"{match.group(1)}{hours:02d}:{minutes:02d}"


def _region(zone: str, text: str) -> str:
    """``zone`` if it is a region of the time zone database Arrow reads."""
    if not _REGION.fullmatch(zone) or not _known_to_arrow(zone):
        raise ValueError(f"'{text}' is not a time zone Spark accepts; {_ADVICE}")
    return zone


def _known_to_arrow(zone: str) -> bool:
    try:
        pc.assume_timezone(pa.array([0], pa.timestamp("s")), zone)
    except pa.ArrowInvalid:
        return False
    return True
