"""Points in time as operators write them on the command line (``--to``, ``--begin``, ``--end``). Pure.

``earliest`` and ``latest`` name a queue's two ends; otherwise a time is epoch milliseconds (digits) or an
ISO-8601 date and time (``2024-05-01T12:00:00``, ``2024-05-01 12:00:00.250+02:00``, ``2024-05-01``; without a
zone it is local time). A reset takes all three forms; a search range only times.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

__all__ = ["EARLIEST", "LATEST", "ResetPoint", "format_ms", "parse_reset_point", "parse_time"]

EARLIEST = 0
"""The reset timestamp meaning "the oldest message still stored" (INVOKE_BROKER_TO_RESET_OFFSET, docs/admin.md §4)."""
LATEST = -1
"""The reset timestamp meaning "the queue's end"."""

_MAX_MS = 253402300799999  # 9999-12-31T23:59:59.999Z
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class ResetPoint:
    """Where a reset sends a group: ``timestamp`` as INVOKE_BROKER_TO_RESET_OFFSET takes it."""

    timestamp: int
    text: str
    """How the operator wrote it (for messages)."""


def parse_time(text: str) -> int:
    """Epoch milliseconds of ``text`` (digits: epoch ms; else ISO-8601, local time without a zone); ValueError."""
    t = text.strip()
    if not t:
        raise ValueError("empty time")
    if t.isdigit():
        ms = int(t)
        if ms > _MAX_MS:
            raise ValueError(f"{text!r} is past year 9999 as epoch milliseconds")
        return ms
    try:
        when = datetime.fromisoformat(t)
    except ValueError:
        raise ValueError(
            f"{text!r} is not a time: give epoch milliseconds or ISO-8601 such as 2024-05-01T12:00:00"
        ) from None
    aware = when if when.tzinfo is not None else when.astimezone()
    ms = (aware - _EPOCH) // timedelta(milliseconds=1)  # exact: a float timestamp loses milliseconds in far years
    if ms < 0:
        raise ValueError(f"{text!r} is before 1970")
    return ms


def parse_reset_point(text: str) -> ResetPoint:
    """``earliest``, ``latest`` or a time (``parse_time``); ValueError otherwise."""
    word = text.strip().lower()
    if word == "earliest":
        return ResetPoint(EARLIEST, "earliest")
    if word == "latest":
        return ResetPoint(LATEST, "latest")
    ms = parse_time(text)
    if ms == 0:
        return ResetPoint(EARLIEST, text)
    return ResetPoint(ms, text)


def format_ms(ms: int) -> str:
    """Epoch milliseconds as local ISO time to the millisecond (``-`` for 0 or less: never)."""
    if ms <= 0:
        return "-"
    return datetime.fromtimestamp(ms / 1000).astimezone().isoformat(sep=" ", timespec="milliseconds")
