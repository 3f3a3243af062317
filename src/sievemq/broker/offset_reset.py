"""Where an offset reset puts a group in one queue (docs/admin.md §4). Pure: the store is read through callables.

A reset names a time: ``-1`` means the queue's end (``latest``); any other value ``T`` (epoch ms, ``0`` for the
oldest message still stored) means the first message stored at or after ``T``, so that the group consumes again
exactly what was stored since ``T`` (past the last message: the queue's end). Without ``force`` a group is only
moved back, never forward past messages it has not consumed (RocketMQ's ``isForce``).
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["LATEST", "offset_at_time", "reset_to"]

LATEST = -1
"""The timestamp that means "the queue's end"."""


def offset_at_time(
    timestamp: int,
    min_offset: int,
    max_offset: int,
    nearest: Callable[[int], int],
    store_time: Callable[[int], int | None],
) -> int:
    """The first offset in ``[min_offset, max_offset]`` whose message was stored at or after ``timestamp``
    (``max_offset`` when none was, and for ``LATEST``).

    ``nearest(ts)`` is the store's SEARCH_OFFSET_BY_TIMESTAMP answer (the first offset stored at or after ``ts``;
    an offset stored at ``ts`` or either neighbour is corrected here too); ``store_time(offset)`` the store time
    of the message at ``offset`` (None when gone).
    """
    if timestamp < 0 or min_offset >= max_offset:
        return max_offset
    if timestamp == 0:
        return min_offset
    offset = min(max(nearest(timestamp), min_offset), max_offset - 1)
    t = store_time(offset)
    if t is None or t < timestamp:  # the earlier neighbour: the next one is the first at or after the time
        offset += 1
    while offset > min_offset and (t := store_time(offset - 1)) is not None and t >= timestamp:
        offset -= 1  # equal store times before the one found (a burst within one millisecond)
    return offset


def reset_to(current: int, target: int, force: bool) -> int:
    """The group's offset after a reset to ``target`` from ``current`` (-1: none committed): the target when
    forced, when there is no offset yet, or when it lies behind; else unchanged."""
    if force or current < 0 or target < current:
        return target
    return current
