"""When a master may acknowledge: its etcd lease, as its own clock sees it (pure; docs/failover.md §4).

etcd expires a lease ``ttl`` seconds after the last keep-alive it received, and a keep-alive is received after it
was sent; so a lease renewed by a keep-alive sent at ``sent`` (this process's monotonic clock) lives at least until
``sent + ttl`` on etcd's clock. The master acknowledges only before ``sent + ttl - margin``: the margin covers a clock
that runs slower than etcd's and a pause between the check and the answer leaving. After ``sent + ttl`` the lease may
be gone and another master elected: the broker steps down without asking (it may not be able to ask).
"""

from __future__ import annotations

__all__ = ["LeaseClock"]


class LeaseClock:
    """The local view of one etcd lease: renewed at, valid until, surely expired after."""

    __slots__ = ("_sent", "margin", "ttl")

    def __init__(self, ttl: float, margin: float) -> None:
        """``margin`` must be below ``ttl``."""
        if not 0 < margin < ttl:
            raise ValueError(f"the fencing margin ({margin}s) must be above 0 and below the lease's TTL ({ttl}s)")
        self.ttl = ttl
        self.margin = margin
        self._sent: float | None = None

    def renewed(self, sent: float) -> None:
        """A keep-alive (or the grant) sent at ``sent`` was answered with the lease alive."""
        if self._sent is None or sent > self._sent:
            self._sent = sent

    def lost(self) -> None:
        """etcd said the lease is gone."""
        self._sent = None

    def valid(self, now: float) -> bool:
        """True while a master may acknowledge."""
        return self._sent is not None and now < self._sent + self.ttl - self.margin

    def expired(self, now: float) -> bool:
        """True once etcd may have let the lease go (never renewed, lost, or ``ttl`` past its last renewal)."""
        return self._sent is None or now >= self._sent + self.ttl

    def left(self, now: float) -> float:
        """Seconds of acknowledging left (0 when none)."""
        return 0.0 if self._sent is None else max(0.0, self._sent + self.ttl - self.margin - now)
