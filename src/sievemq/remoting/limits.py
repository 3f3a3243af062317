"""What one client may cost a server, and the decisions that enforce it: pure, no I/O.

* ``ServerLimits``: the bounds of a ``RemotingServer`` (the broker's come from its settings).
* ``FlowGate``: per connection, which requests start now, which wait, and whether to read from the socket.
* ``PartialFrames``: bytes of unfinished frames across all connections of a server, against a budget.
* ``connection_cap``: how many connections the file-descriptor limit leaves room for.

``ServerGuard`` (guard.py) and ``Connection`` (connection.py) do what these decide.
"""

from __future__ import annotations

import sys
from collections import deque
from dataclasses import dataclass, fields
from typing import Generic, Protocol, TypeVar

MiB = 1024 * 1024
T = TypeVar("T")


@dataclass(frozen=True)
class ServerLimits:
    """The bounds a RemotingServer keeps, per connection and for all of its connections."""

    max_unsent_bytes: int = 64 * MiB
    """Per connection: stop reading while more than this many bytes of answers wait to be sent."""
    max_requests_in_flight: int = 1024
    """Per connection: requests being served at once (held long-polling pulls count); more wait unread."""
    partial_frame_budget: int = 256 * MiB
    """All connections: bytes of frames not yet complete; a connection that would go past it is closed."""
    frame_timeout: float = 30.0
    """Close a connection whose frame is still incomplete this many seconds after its first byte."""
    max_connections: int = 0
    """Connections at most (0: no fixed cap); the file-descriptor limit caps them in any case."""
    fd_reserve: int = 128
    """File descriptors kept free for everything but connections (store files, outgoing connections)."""
    warning_interval: float = 10.0
    """Connection warnings: at most one line per peer IP per this many seconds."""

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if value < 0 or (value == 0 and f.name not in ("max_connections", "fd_reserve")):
                raise ValueError(f"ServerLimits.{f.name} must be > 0 (>= 0 for the caps), not {value!r}")


class FlowGate(Generic[T]):
    """One connection's back-pressure: deciding only (``Connection`` pauses and resumes its transport).

    A request starts when fewer than ``limit`` are in flight, the transport's output is below its high-water
    mark (between ``pause_writing`` and ``resume_writing`` it is not) and no earlier request waits; otherwise it
    waits, in order. Reading should stop while any request waits or none could start, and go on once one could.
    """

    __slots__ = ("_waiting", "in_flight", "limit", "reading", "write_paused")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.in_flight = 0
        self.write_paused = False
        self.reading = True
        """Whether the transport reads, as last decided by ``reading_change``."""
        self._waiting: deque[T] = deque()

    @property
    def waiting(self) -> int:
        """Requests received that have not started."""
        return len(self._waiting)

    def offer(self, item: T) -> bool:
        """True: ``item`` starts now (counted in flight). False: it waits (returned later by ``finished`` or
        ``resume_writing``)."""
        if self._waiting or self.in_flight >= self.limit or self.write_paused:
            self._waiting.append(item)
            return False
        self.in_flight += 1
        return True

    def finished(self) -> list[T] | None:
        """One request is done; returns the waiting ones that start now (counted in flight), or None when reading
        goes on (then nothing waits and nothing changes: the common case, kept cheap)."""
        self.in_flight -= 1
        if self.reading:
            return None
        return self._release()

    def pause_writing(self) -> None:
        """The transport's output went over its high-water mark."""
        self.write_paused = True

    def resume_writing(self) -> list[T]:
        """The output drained below the low-water mark; returns the waiting requests that start now."""
        self.write_paused = False
        return self._release()

    def clear(self) -> None:
        """The connection is gone: drop the waiting requests."""
        self._waiting.clear()

    def _release(self) -> list[T]:
        out = []
        while self._waiting and self.in_flight < self.limit and not self.write_paused:
            out.append(self._waiting.popleft())
            self.in_flight += 1
        return out

    def reading_change(self) -> bool | None:
        """True: resume reading, False: pause it, None: leave it as it is."""
        want = not self._waiting and self.in_flight < self.limit and not self.write_paused
        if want is self.reading:
            return None
        self.reading = want
        return want


class PartialHolder(Protocol):
    """A connection as ``PartialFrames`` sees it."""

    partial_bytes: int
    """Bytes of its unfinished frame counted in the budget."""
    partial_since: float
    """When the first byte of its unfinished frame arrived (0: none, or its timer is suspended)."""


class PartialFrames:
    """Bytes of unfinished frames held for all connections of a server, against ``budget``."""

    __slots__ = ("budget", "total")

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.total = 0

    def hold(self, conn: PartialHolder, held: int, completed: bool, now: float) -> bool:
        """``conn``'s decoder now holds ``held`` bytes after data arrived at ``now`` (``completed``: that data
        finished at least one frame, so what is held began with it). False when the total is past the budget:
        the caller then closes ``conn`` and calls ``release``."""
        self.total += held - conn.partial_bytes
        conn.partial_bytes = held
        if not held:
            conn.partial_since = 0.0
        elif completed or not conn.partial_since:
            conn.partial_since = now
        return self.total <= self.budget

    def release(self, conn: PartialHolder) -> None:
        """``conn`` holds nothing any more (it closed)."""
        self.total -= conn.partial_bytes
        conn.partial_bytes = 0
        conn.partial_since = 0.0


def overdue(conn: PartialHolder, now: float, timeout: float) -> bool:
    """True when ``conn``'s unfinished frame began more than ``timeout`` seconds before ``now``."""
    return bool(conn.partial_since) and now - conn.partial_since > timeout


def connection_cap(configured: int, fd_limit: int | None, open_fds: int | None, own: int, reserve: int) -> int:
    """How many connections a server may hold: ``configured`` (0: no fixed cap) and what the file-descriptor
    limit ``fd_limit`` (None: unlimited) leaves after ``reserve`` and the descriptors open for other uses
    (``open_fds`` in all, None when unknown, less the server's ``own`` connections)."""
    cap = configured if configured > 0 else sys.maxsize
    if fd_limit is not None:
        other = max(0, open_fds - own) if open_fds is not None else 0
        cap = min(cap, max(0, fd_limit - other - reserve))
    return cap
