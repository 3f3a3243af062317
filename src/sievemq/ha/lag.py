"""How many seconds a slave is behind its master, from the slave's reports alone (pure; docs/metrics.md §7).

The master sets a *mark* (the time and its commit-log end) and waits for a report that covers it: then the slave
held everything the master had at the mark's time, so that time becomes ``caught_up_at`` and a new mark is set. A
slave's lag in seconds is how long ago ``caught_up_at`` was, or 0 while it holds the master's whole log. Under a
steady stream of writes the marks keep being covered and the figure stays near the real delay; a slave that stops
reporting (a dead link) sees its figure grow from its last covered mark. Costs a comparison per report.
"""

from __future__ import annotations

__all__ = ["LagClock"]


class LagClock:
    """One slave's ``caught_up_at`` (times are the caller's monotonic clock, offsets commit-log offsets)."""

    __slots__ = ("_mark_end", "_mark_time", "caught_up_at")

    def __init__(self, now: float, end: int) -> None:
        """A slave connected at ``now`` while the master's log ended at ``end``."""
        self.caught_up_at = now
        self._mark_time = now
        self._mark_end = end

    def report(self, acked: int, end: int, now: float) -> None:
        """The slave reported holding the log up to ``acked`` at ``now``; the master's log ends at ``end``."""
        if acked >= end:
            self.caught_up_at = now
            self._mark_time, self._mark_end = now, end
        elif acked >= self._mark_end:
            self.caught_up_at = self._mark_time
            self._mark_time, self._mark_end = now, end

    def seconds(self, acked: int, end: int, now: float) -> float:
        """Seconds behind: 0 when ``acked`` reaches ``end``, else since ``caught_up_at``."""
        return 0.0 if acked >= end else max(0.0, now - self.caught_up_at)
