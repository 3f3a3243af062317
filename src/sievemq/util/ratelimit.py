"""Rate-limited logging decisions: at most one line per key (a peer IP, say) per interval, and a count of the
lines held back, reported with the next line of that key.

Pure: no I/O, no logging, the clock is injected. The caller formats and writes the lines it is allowed::

    limiter = RateLimitedLog(10.0)
    held_back = limiter.allow(peer_ip)
    if held_back is not None:
        log.warning("bad frame from %s%s", peer_ip, suppressed_note(held_back))
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable

OVERFLOW_KEY = "(other keys)"
"""Where lines of new keys are counted once ``max_keys`` keys are tracked."""


class RateLimitedLog:
    """Allows the first line of each key per ``interval`` seconds and counts the others.

    At most ``max_keys`` keys are tracked at once (so a flood of distinct keys cannot grow it, nor the log):
    beyond, new keys share ``overflow_key``. ``prune`` forgets keys whose interval is over.
    """

    __slots__ = ("_clock", "_keys", "interval", "max_keys", "overflow_key")

    def __init__(
        self,
        interval: float,
        *,
        max_keys: int = 1024,
        clock: Callable[[], float] = time.monotonic,
        overflow_key: Hashable = OVERFLOW_KEY,
    ) -> None:
        if interval < 0 or max_keys < 1:
            raise ValueError("RateLimitedLog needs interval >= 0 and max_keys >= 1")
        self.interval = interval
        self.max_keys = max_keys
        self.overflow_key = overflow_key
        self._clock = clock
        self._keys: dict[Hashable, list[float]] = {}  # key -> [start of its interval, lines held back in it]

    def allow(self, key: Hashable) -> int | None:
        """None: hold this line back. Else write it, noting the returned number of lines held back before it."""
        now = self._clock()
        entry = self._keys.get(key)
        if entry is None and len(self._keys) >= self.max_keys:
            key = self.overflow_key
            entry = self._keys.get(key)
        if entry is None:
            self._keys[key] = [now, 0]
            return 0
        if now - entry[0] < self.interval:
            entry[1] += 1
            return None
        held_back = int(entry[1])
        entry[0], entry[1] = now, 0
        return held_back

    def reset(self, key: Hashable) -> None:
        """Let the next line of ``key`` through at once (its held-back count is dropped)."""
        self._keys.pop(key, None)

    def prune(self) -> list[tuple[Hashable, int]]:
        """Forget keys whose interval is over; returns those that had lines held back, with their counts (the
        caller may log them: they will not be reported with a next line)."""
        now = self._clock()
        stale = [k for k, (start, _) in self._keys.items() if now - start >= self.interval]
        out = []
        for k in stale:
            held_back = int(self._keys.pop(k)[1])
            if held_back:
                out.append((k, held_back))
        return out

    def __len__(self) -> int:
        return len(self._keys)


def suppressed_note(held_back: int) -> str:
    """`` (N similar lines suppressed)`` for a log line that follows held-back ones, else ``""``."""
    if not held_back:
        return ""
    return f" ({held_back} similar line{'s' if held_back != 1 else ''} suppressed)"
