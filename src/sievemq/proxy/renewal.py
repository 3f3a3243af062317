"""Auto-renewed leases (docs/proxy.md §5): a PushConsumer receives with ``auto_renew``, and the proxy keeps its
messages invisible until the client acks (or nacks) them, however long its listener runs.

Each message received with ``auto_renew`` is tracked under the receipt handle the client was given. Shortly before
its lease runs out (a third of the invisible time before, at least 2 s) the proxy changes its invisible time again
at the broker; the broker gives a new handle each time, so the client's handle is translated (``current``) when it
acks or changes the message. A renewal refused (the message was acked, or delivered again) ends the tracking. A
client that terminates or goes silent loses its renewals: its messages come back after their invisible time.
At most ``MAX_TRACKED`` messages are tracked per proxy; beyond that a message is simply not renewed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from sievemq.util.tasks import Background

__all__ = ["MAX_TRACKED", "Renewals"]

log = logging.getLogger(__name__)

MAX_TRACKED = 100_000
Change = Callable[[str, str, str, int], Awaitable[str]]
"""``change(group, topic, handle, invisible_ms)`` -> the new handle."""


@dataclass(slots=True)
class _Tracked:
    group: str
    topic: str
    client_id: str
    current: str
    invisible_ms: int
    renew_at: float


class Renewals:
    """See the module docstring."""

    def __init__(self, change: Change, tick: float = 1.0) -> None:
        self._change = change
        self.tick = tick
        self.tracked: dict[str, _Tracked] = {}
        self._task = Background("proxy-renewals")
        self.renewed = 0

    @staticmethod
    def _lead_s(invisible_ms: int) -> float:
        return max(2.0, invisible_ms / 3000.0)

    def track(self, group: str, topic: str, client_id: str, handle: str, invisible_ms: int) -> None:
        """Keep the message of ``handle`` invisible until it is acked."""
        if len(self.tracked) >= MAX_TRACKED:
            return
        at = time.monotonic() + max(0.5, invisible_ms / 1000.0 - self._lead_s(invisible_ms))
        self.tracked[handle] = _Tracked(group, topic, client_id, handle, invisible_ms, at)

    def current(self, handle: str) -> str:
        """The broker's handle now for the one the client holds."""
        t = self.tracked.get(handle)
        return t.current if t is not None else handle

    def done(self, handle: str) -> None:
        """The client acked, nacked or dead-lettered the message: no more renewals."""
        self.tracked.pop(handle, None)

    def forget_client(self, client_id: str) -> None:
        """The client is gone."""
        for h in [h for h, t in self.tracked.items() if t.client_id == client_id]:
            del self.tracked[h]

    def start(self) -> None:
        """Run the renewal rounds."""
        self._task.start(self._loop())

    async def stop(self) -> None:
        """Stop the rounds."""
        await self._task.stop()

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.tick)
            try:
                await self.renew_due()
            except Exception:
                log.exception("renewal round failed")

    async def renew_due(self) -> int:
        """Renew every lease due now; how many were renewed."""
        now = time.monotonic()
        due = [(h, t) for h, t in self.tracked.items() if t.renew_at <= now]
        n = 0
        for handle, t in due:
            try:
                new = await self._change(t.group, t.topic, t.current, t.invisible_ms)
            except Exception as e:
                log.info("renewal of a message of %s stopped: %s", t.topic, e)
                self.tracked.pop(handle, None)
                continue
            if handle in self.tracked:  # not acked meanwhile
                t.current = new
                t.renew_at = time.monotonic() + max(0.5, t.invisible_ms / 1000.0 - self._lead_s(t.invisible_ms))
            n += 1
        self.renewed += n
        return n
