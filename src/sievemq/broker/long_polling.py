"""Long polling: pulls that found nothing wait here until a matching message is dispatched to their queue.

A held pull is an asyncio future keyed by (topic, queue id). The store's dispatch listener wakes every waiter
whose offset the new entry reaches and whose filter accepts the entry's tag code, on the same loop turn.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass

CqMatch = Callable[[int, Mapping[str, str]], bool]


@dataclass(slots=True)
class _Waiter:
    offset: int
    match: CqMatch | None
    future: asyncio.Future[None]


class PullHoldService:
    """Parks pulls per queue and wakes them on dispatch."""

    def __init__(self) -> None:
        self._waiters: dict[tuple[str, int], list[_Waiter]] = {}
        self._held = 0
        """Parked pulls over every queue (``held``: GET_BROKER_RUNTIME_INFO asks without walking the queues)."""

    def hold(self, topic: str, queue_id: int, offset: int, match: CqMatch | None) -> asyncio.Future[None]:
        """Park a pull waiting for an entry at ``offset`` or later that ``match(tags_code, properties)`` accepts."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.setdefault((topic, queue_id), []).append(_Waiter(offset, match, fut))
        self._held += 1
        return fut

    def release(self, topic: str, queue_id: int, fut: asyncio.Future[None]) -> None:
        """Forget a parked pull (after it woke or timed out)."""
        key = (topic, queue_id)
        ws = self._waiters.get(key)
        if ws is None:
            return
        before = len(ws)
        ws[:] = [w for w in ws if w.future is not fut]
        self._held -= before - len(ws)
        if not ws:
            del self._waiters[key]

    def on_dispatch(
        self, topic: str, queue_id: int, queue_offset: int, tags_code: int, props: Mapping[str, str]
    ) -> None:
        """A message was appended at ``queue_offset``: wake the pulls it satisfies."""
        ws = self._waiters.get((topic, queue_id))
        if not ws:
            return
        for w in ws:
            if not w.future.done() and w.offset <= queue_offset and (w.match is None or w.match(tags_code, props)):
                w.future.set_result(None)

    def held(self) -> int:
        """Number of parked pulls."""
        return self._held

    def wake(self, topic: str, queue_id: int) -> None:
        """Wake every pull parked on one queue (its group's offset was reset: docs/admin.md §4)."""
        for w in self._waiters.get((topic, queue_id), []):
            if not w.future.done():
                w.future.set_result(None)

    def wake_all(self) -> None:
        """Wake every parked pull (on shutdown)."""
        for ws in self._waiters.values():
            for w in ws:
                if not w.future.done():
                    w.future.set_result(None)
