"""Delay levels of scheduled messages (RocketMQ ``messageDelayLevel``, docs/protocol/message-format.md §11).

Level ``n`` (1-based) is the n-th duration of the list; the store keeps level-``n`` messages in
``SCHEDULE_TOPIC_XXXX`` queue ``n - 1`` and puts their delivery time in the consume-queue tags slot.
"""

from __future__ import annotations

__all__ = ["DEFAULT_DELAY_LEVELS", "DEFAULT_LEVEL_COUNT", "SCHEDULE_TOPIC", "delay_ms_for_level", "parse_levels"]

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
"""RocketMQ's ``messageDelayLevel`` default (the broker's setting; sievemq's one copy of it)."""
DEFAULT_LEVEL_COUNT = len(DEFAULT_DELAY_LEVELS.split())
"""18: the highest delay level a client may ask for under the default levels."""

_UNITS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_levels(spec: str) -> list[int]:
    """Parse ``"1s 5s 10s ... 2h"`` into milliseconds per level (index 0 = level 1).

    Units: ``s``, ``m``, ``h``, ``d`` (as Java); raises ``ValueError`` on anything else.
    """
    out: list[int] = []
    for word in spec.split():
        unit = word[-1:]
        if unit not in _UNITS or not word[:-1].isdigit():
            raise ValueError(f"bad delay level {word!r} (expected e.g. 10s, 5m, 2h, 1d)")
        out.append(int(word[:-1]) * _UNITS[unit])
    if not out:
        raise ValueError("no delay levels given")
    return out


def delay_ms_for_level(levels: list[int], level: int) -> int:
    """Delay of a 1-based ``level``, clamped to ``[1, len(levels)]``."""
    return levels[max(1, min(level, len(levels))) - 1]
