"""Failed logins per client address, and when an address must wait (docs/dashboard.md §5). Pure: the clock is
injected.

An address may fail ``limit`` times in a window of ``window`` seconds that starts at its first failure; past that
its requests are refused, without their token being looked at, until the window ends. IPv6 addresses count per
/64 (one host usually owns a whole /64), IPv4-mapped ones as their IPv4 address. At most ``max_peers`` addresses
are tracked: the windows that ended are forgotten first, then the oldest ones, so memory stays bounded whatever
addresses an attacker uses, and nobody is ever refused for someone else's failures.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable

from sievemq.remoting.peers import peer_key as any_peer_key

__all__ = ["MAX_PEERS", "WINDOW_SECONDS", "FailureLimiter", "peer_key"]

WINDOW_SECONDS = 60.0
"""The window failures are counted in."""
MAX_PEERS = 10_000
"""Addresses tracked at most."""


def peer_key(ip: str | None) -> str:
    """The key an address's failures count under: the IPv4 address, or an IPv6 address's /64
    (``remoting.peers.peer_key``); ``(unknown)`` without an address."""
    return any_peer_key(ip)[:64] if ip else "(unknown)"


class FailureLimiter:
    """Counts failures per key (``peer_key``) and says how long a key must wait."""

    __slots__ = ("_clock", "_peers", "limit", "max_peers", "window")

    def __init__(
        self,
        limit: int,
        window: float = WINDOW_SECONDS,
        *,
        max_peers: int = MAX_PEERS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if limit < 1 or window <= 0 or max_peers < 1:
            raise ValueError("FailureLimiter needs limit >= 1, window > 0 and max_peers >= 1")
        self.limit = limit
        self.window = window
        self.max_peers = max_peers
        self._clock = clock
        self._peers: OrderedDict[str, list[float]] = OrderedDict()  # key -> [window start, failures]; oldest first

    def __len__(self) -> int:
        return len(self._peers)

    def wait(self, key: str) -> float:
        """Seconds ``key`` must wait before its next try is looked at (0: now)."""
        entry = self._peers.get(key)
        if entry is None:
            return 0.0
        left = entry[0] + self.window - self._clock()
        if left <= 0:
            del self._peers[key]
            return 0.0
        return left if entry[1] >= self.limit else 0.0

    def failed(self, key: str) -> bool:
        """Count a failure of ``key``; True when it is the one that makes ``key`` wait (once per window)."""
        now = self._clock()
        entry = self._peers.get(key)
        if entry is not None and entry[0] + self.window > now:
            entry[1] += 1
            return entry[1] == self.limit
        self._peers[key] = [now, 1]
        self._peers.move_to_end(key)
        self._forget(now)
        return self.limit == 1

    def _forget(self, now: float) -> None:
        """Drop the windows that ended (the oldest come first), then the oldest ones while there are too many."""
        while self._peers:
            key, (start, _) = next(iter(self._peers.items()))
            if start + self.window > now and len(self._peers) <= self.max_peers:
                break
            del self._peers[key]
