"""The filter server's defence against replayed uploads: a time window for ``uploadTimestamp`` and the nonces of
verified uploads, each remembered exactly as long as its timestamp stays inside the window (bounded memory).

docs/protocol/filter-server.md §5.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable

DEFAULT_MAX_NONCES = 100_000


class NonceWindow:
    """Accepts an upload's (timestamp, nonce) once, and only within ``window_seconds`` of the local clock."""

    def __init__(
        self,
        window_seconds: float = 300.0,
        max_nonces: int = DEFAULT_MAX_NONCES,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.window = window_seconds
        self.max_nonces = max_nonces
        self._clock = clock
        self._expiry: dict[tuple[str, str], float] = {}
        self._heap: list[tuple[float, tuple[str, str]]] = []

    def __len__(self) -> int:
        return len(self._expiry)

    def stale(self, timestamp_ms: int) -> str | None:
        """Why ``timestamp_ms`` is outside the window (None when inside)."""
        skew = timestamp_ms / 1000.0 - self._clock()
        if abs(skew) <= self.window:
            return None
        when = "in the future" if skew > 0 else "old"
        return (
            f"uploadTimestamp is {abs(skew):.0f} s {when}, outside the filter server's window of "
            f"{self.window:g} s (uploadWindowSeconds; are the clocks in step?)"
        )

    def _forget_expired(self, now: float) -> None:
        while self._heap and self._heap[0][0] < now:
            _, key = heapq.heappop(self._heap)
            if self._expiry.get(key, now) < now:
                del self._expiry[key]

    def claim(self, account: str, nonce: str, timestamp_ms: int) -> str | None:
        """Record ``nonce`` of ``account`` (call only for a verified, in-window request); why not, or None."""
        now = self._clock()
        self._forget_expired(now)
        key = (account, nonce)
        if key in self._expiry:
            return f"uploadNonce {nonce} was already used by account '{account}' (a replayed request)"
        if len(self._expiry) >= self.max_nonces:
            return (
                f"more than {self.max_nonces} uploads within {self.window:g} s; this one is refused so that none can "
                "be replayed (try again later)"
            )
        expires = timestamp_ms / 1000.0 + self.window
        self._expiry[key] = expires
        heapq.heappush(self._heap, (expires, key))
        return None
